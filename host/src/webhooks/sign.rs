//! Standard Webhooks signing: secrets in the `whsec_<base64>` form, and the
//! `webhook-signature` header, `v1,<base64 HMAC-SHA256 of
//! "{id}.{timestamp}.{body}">`, one signature per secret in use.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::Mac;
use rand::RngCore;

use crate::secrets::hmac;

/// Random bytes of a new secret.
const SECRET_BYTES: usize = 32;

/// A new signing secret, `whsec_` and the base64 of 32 random bytes.
pub(crate) fn new_secret() -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    format!("whsec_{}", STANDARD.encode(bytes))
}

/// The `webhook-signature` value for `secrets` (each `whsec_…`), space separated.
pub(crate) fn signature(secrets: &[&str], id: &str, timestamp: i64, body: &str) -> String {
    let signed = format!("{id}.{timestamp}.{body}");
    (secrets.iter())
        .filter_map(|secret| {
            let key = STANDARD.decode(secret.strip_prefix("whsec_")?).ok()?;
            let mac = hmac(&key, signed.as_bytes()).finalize().into_bytes();
            Some(format!("v1,{}", STANDARD.encode(mac)))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification.
    #[test]
    fn signs_as_the_specification_example() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&[secret], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn two_secrets_two_signatures_and_new_secrets_differ() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert!(a.starts_with("whsec_"));
        let both = signature(&[&a, &b], "msg_1", 1, "{}");
        assert_eq!(both.split(' ').count(), 2);
        assert!(both.starts_with(&signature(&[&a], "msg_1", 1, "{}")));
    }
}
