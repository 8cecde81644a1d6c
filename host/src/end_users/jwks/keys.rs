//! An app's JWKS read into the keys a token may name: RS256 (RSA, 2048 to
//! 4096 bits), ES256 (EC P-256) and EdDSA (Ed25519) signature keys with a
//! `kid`. Every other key (symmetric `oct` secrets above all, encryption
//! keys, other curves, malformed entries) is skipped, never trusted.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, KeyOperations, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey};

/// The algorithms an end user's token may use: asymmetric only, so that
/// holding the JWKS (which is public) never lets anyone sign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Alg {
    Rs256,
    Es256,
    EdDsa,
}

impl Alg {
    /// The accepted algorithm a JOSE header names, exactly (`none`, `HS256`
    /// and every other name are refused).
    pub(super) fn from_header(name: &str) -> Option<Alg> {
        match name {
            "RS256" => Some(Alg::Rs256),
            "ES256" => Some(Alg::Es256),
            "EdDSA" => Some(Alg::EdDsa),
            _ => None,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Alg::Rs256 => "RS256",
            Alg::Es256 => "ES256",
            Alg::EdDsa => "EdDSA",
        }
    }

    pub(super) fn library(self) -> Algorithm {
        match self {
            Alg::Rs256 => Algorithm::RS256,
            Alg::Es256 => Algorithm::ES256,
            Alg::EdDsa => Algorithm::EdDSA,
        }
    }

    fn jwk(self) -> KeyAlgorithm {
        match self {
            Alg::Rs256 => KeyAlgorithm::RS256,
            Alg::Es256 => KeyAlgorithm::ES256,
            Alg::EdDsa => KeyAlgorithm::EdDSA,
        }
    }
}

/// One usable public key and the one algorithm it verifies.
pub(super) struct VerifyKey {
    pub(super) alg: Alg,
    pub(super) key: DecodingKey,
}

/// The usable keys by `kid` (a kid may name keys of several algorithms).
pub(super) type KeySet = HashMap<String, Vec<Arc<VerifyKey>>>;

/// Reads a JWKS document. Fails only if it is not `{"keys": [...]}`; each
/// unusable key is skipped (and logged), so one odd entry does not hide the rest.
pub(super) fn parse_jwks(body: &[u8]) -> Result<KeySet, String> {
    #[derive(serde::Deserialize)]
    struct Document {
        keys: Vec<serde_json::Value>,
    }
    let document: Document = serde_json::from_slice(body)
        .map_err(|err| format!("the JWKS is not a JSON object with a `keys` array: {err}"))?;
    let mut set = KeySet::new();
    for entry in document.keys {
        match usable(entry) {
            Ok((kid, key)) => set.entry(kid).or_default().push(Arc::new(key)),
            Err(why) => tracing::debug!(why, "JWKS entry skipped"),
        }
    }
    Ok(set)
}

fn usable(entry: serde_json::Value) -> Result<(String, VerifyKey), String> {
    let jwk: Jwk =
        serde_json::from_value(entry).map_err(|err| format!("not a JWK we can read: {err}"))?;
    let kid = match &jwk.common.key_id {
        Some(kid) if !kid.is_empty() => kid.clone(),
        _ => return Err("no kid".to_string()),
    };
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return Err(format!("{kid}: not a signature key (use)"));
    }
    if (jwk.common.key_operations.as_ref()).is_some_and(|ops| !ops.contains(&KeyOperations::Verify))
    {
        return Err(format!("{kid}: key_ops does not include verify"));
    }
    let alg = match &jwk.algorithm {
        AlgorithmParameters::RSA(rsa) => {
            let n = decode(&rsa.n)?;
            let leading_zeros = n.iter().take_while(|b| **b == 0).count();
            let bits = (n.len() - leading_zeros) * 8;
            if !(2048..=4096).contains(&bits) {
                return Err(format!(
                    "{kid}: an RSA key of {bits} bits (2048 to 4096 accepted)"
                ));
            }
            Alg::Rs256
        }
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
            if decode(&ec.x)?.len() != 32 || decode(&ec.y)?.len() != 32 {
                return Err(format!("{kid}: P-256 coordinates are not 32 bytes"));
            }
            Alg::Es256
        }
        // The library's Ed25519 verifier slices the first 32 bytes: a
        // shorter `x` would panic there, so its length is checked here.
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            if decode(&okp.x)?.len() != 32 {
                return Err(format!("{kid}: an Ed25519 key that is not 32 bytes"));
            }
            Alg::EdDsa
        }
        _ => return Err(format!("{kid}: not an RSA, P-256 or Ed25519 public key")),
    };
    if let Some(named) = jwk.common.key_algorithm
        && named != alg.jwk()
    {
        return Err(format!("{kid}: its alg {named:?} is not {}", alg.name()));
    }
    let key = DecodingKey::from_jwk(&jwk).map_err(|err| format!("{kid}: {err}"))?;
    Ok((kid, VerifyKey { alg, key }))
}

fn decode(field: &str) -> Result<Vec<u8>, String> {
    URL_SAFE_NO_PAD
        .decode(field)
        .map_err(|_| "a key field is not base64url".to_string())
}
