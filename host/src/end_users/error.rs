//! `EndUserAuthError`: why an end user's token (minted here, or a JWT of
//! the app's identity provider) or an app's JWKS settings were refused,
//! each answered by the API with its own code (`api::ErrorCode`, mapped
//! in `api/error.rs`).

/// Why a token was refused. Every variant but `JwksUnavailable` is the
/// client's doing (401); `JwksUnavailable` is the identity provider's (503,
/// its detail logged rather than sent); `InvalidJwksUrl` comes only from
/// [`super::JwksVerifier::new`], at deploy time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EndUserAuthError {
    #[error("the token is malformed: {0}")]
    MalformedToken(String),
    #[error("the token's algorithm {0:?} is not accepted (RS256, ES256 and EdDSA are)")]
    UnsupportedAlgorithm(String),
    #[error("the identity provider's JWKS has no {alg} key with kid {kid:?}")]
    UnknownKey { kid: String, alg: &'static str },
    #[error("the token names no key (its header has no kid)")]
    MissingKeyId,
    #[error("the token's signature does not verify")]
    InvalidSignature,
    #[error("the token has expired")]
    TokenExpired,
    #[error("the token is not valid yet (nbf)")]
    TokenNotYetValid,
    #[error("the token's issuer (iss) is not this app's identity provider")]
    WrongIssuer,
    #[error("the token's audience (aud) is not this app")]
    WrongAudience,
    #[error(
        "the token was revoked: the app revoked this user's tokens issued until {0} (POST /apps/{{id}}/end-users/{{user}}/revoke); get a new one"
    )]
    TokenRevoked(String),
    #[error("the identity provider's JWKS is unavailable: {0}")]
    JwksUnavailable(String),
    #[error("the JWKS URL is refused: {0}")]
    InvalidJwksUrl(String),
}

impl EndUserAuthError {
    /// The code the API answers this refusal with, for this module's tests:
    /// the API's own mapping is `api/error.rs` (`ErrorCode::from`), and
    /// `api/error_code_tests.rs` checks that the two agree.
    #[cfg(test)]
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::MalformedToken(_) => "malformed_token",
            Self::UnsupportedAlgorithm(_) => "unsupported_algorithm",
            Self::UnknownKey { .. } | Self::MissingKeyId => "unknown_key",
            Self::InvalidSignature => "invalid_signature",
            Self::TokenExpired => "token_expired",
            Self::TokenNotYetValid => "token_not_yet_valid",
            Self::WrongIssuer => "wrong_issuer",
            Self::WrongAudience => "wrong_audience",
            Self::TokenRevoked(_) => "token_revoked",
            Self::JwksUnavailable(_) => "jwks_unavailable",
            Self::InvalidJwksUrl(_) => "invalid_jwks_url",
        }
    }
}

/// A library refusal, once the header, algorithm and key have been checked.
impl From<jsonwebtoken::errors::Error> for EndUserAuthError {
    fn from(err: jsonwebtoken::errors::Error) -> Self {
        use jsonwebtoken::errors::ErrorKind as K;
        match err.kind() {
            K::InvalidSignature
            | K::InvalidEcdsaKey
            | K::InvalidEddsaKey
            | K::InvalidRsaKey(_)
            | K::InvalidKeyFormat => Self::InvalidSignature,
            K::ExpiredSignature => Self::TokenExpired,
            K::ImmatureSignature => Self::TokenNotYetValid,
            K::InvalidIssuer => Self::WrongIssuer,
            K::InvalidAudience => Self::WrongAudience,
            K::MissingRequiredClaim(claim) if claim == "iss" => Self::WrongIssuer,
            K::MissingRequiredClaim(claim) if claim == "aud" => Self::WrongAudience,
            K::MissingRequiredClaim(claim) => {
                Self::MalformedToken(format!("it has no `{claim}` claim"))
            }
            K::InvalidClaimFormat(claim) => {
                Self::MalformedToken(format!("its `{claim}` claim is not a number"))
            }
            K::InvalidAlgorithm | K::UnsupportedAlgorithm | K::MissingAlgorithm => {
                Self::UnsupportedAlgorithm("(refused by the verifier)".to_string())
            }
            _ => Self::MalformedToken("it is not a signed JWT with JSON claims".to_string()),
        }
    }
}
