//! Stream tokens: short-lived, session-scoped credentials for the event
//! stream only, for browsers whose `EventSource` cannot send headers.
//!
//! A token is `st1.<session>.<expiry unix seconds>.<key id>.<HMAC-SHA256>`,
//! signed with a key derived from the master key (so tokens survive a
//! restart). It carries the id of the key that minted it: revoking that key
//! revokes its tokens. The signature also covers the key's stored hash
//! (not in the token): a key replaced under the same id (the bootstrap key,
//! rotated by a restart) does not keep the old key's tokens valid.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use uuid::Uuid;

use crate::keys::{END_USER_KEY_PREFIX, Keys, Principal, Scope};
use crate::secrets::MasterKey;

/// How long a stream token is valid (for connecting; an open stream stays open).
pub(crate) const TOKEN_TTL: Duration = Duration::from_secs(15 * 60);

pub(crate) struct StreamTokens {
    key: [u8; 32],
    /// The key registry, for the hash each token is bound to.
    keys: Keys,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

impl StreamTokens {
    pub(crate) fn new(master: &MasterKey, keys: Keys) -> StreamTokens {
        StreamTokens {
            key: master.derive("agenthost stream tokens v1"),
            keys,
        }
    }

    /// The MAC of a token's `body`, bound to the hash of the key it names
    /// as `keys` holds it now (nothing for an end user, who names no key).
    fn mac(&self, body: &str, key_id: &str, keys: &Keys) -> Hmac<Sha256> {
        let bound = keys.hash_of(key_id).map(hex::encode).unwrap_or_default();
        crate::secrets::hmac(&self.key, format!("{body}\n{bound}").as_bytes())
    }

    /// A token for `session`, minted by key `key_id`; returns it and its
    /// expiry as an RFC 3339 timestamp.
    pub(crate) fn mint(&self, session: Uuid, key_id: &str) -> (String, String) {
        let expires = unix_now() + TOKEN_TTL.as_secs();
        let (token, _) = self.mint_until(session, key_id, expires);
        let at = UNIX_EPOCH + Duration::from_secs(expires);
        (token, humantime::format_rfc3339_seconds(at).to_string())
    }

    fn mint_until(&self, session: Uuid, key_id: &str, expires: u64) -> (String, u64) {
        let body = format!("st1.{}.{expires}.{key_id}", session.simple());
        let tag = hex::encode(self.mac(&body, key_id, &self.keys).finalize().into_bytes());
        (format!("{body}.{tag}"), expires)
    }

    /// The principal of a valid, unexpired token whose minting key still exists.
    pub(crate) fn verify(&self, token: &str, keys: &Keys) -> Option<Principal> {
        let (body, tag) = token.rsplit_once('.')?;
        let mut parts = body.split('.');
        let (version, session, expires, key_id) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version != "st1" || parts.next().is_some() {
            return None;
        }
        let tag = hex::decode(tag).ok()?;
        self.mac(body, key_id, keys).verify_slice(&tag).ok()?;
        // An end user's token names no API key: it lives for its TTL.
        let end_user = key_id.starts_with(END_USER_KEY_PREFIX);
        if expires.parse::<u64>().ok()? <= unix_now() || !(end_user || keys.contains(key_id)) {
            return None;
        }
        Some(Principal {
            key_id: key_id.to_string(),
            name: "stream token".into(),
            scope: Scope::Session(Uuid::parse_str(session).ok()?),
            user: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::mint;
    use crate::store::KeyClass;

    #[test]
    fn tokens_verify_for_their_session_until_their_key_is_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let keys = Keys::default();
        let tokens = StreamTokens::new(&MasterKey::load(None, dir.path()).unwrap(), keys.clone());
        let key = mint(KeyClass::Platform, "k", None);
        keys.insert(&key.record);
        let session = Uuid::now_v7();
        let (token, _) = tokens.mint(session, &key.record.id);
        let principal = tokens.verify(&token, &keys).unwrap();
        assert_eq!(principal.scope, Scope::Session(session));
        let mut forged = token.clone();
        forged.replace_range(4..5, if &token[4..5] == "0" { "1" } else { "0" });
        assert!(tokens.verify(&forged, &keys).is_none());
        assert!(tokens.verify("st1.x.y.z.00", &keys).is_none());
        let (expired, _) = tokens.mint_until(session, &key.record.id, unix_now() - 1);
        assert!(tokens.verify(&expired, &keys).is_none(), "expired");
        keys.remove(&key.record.id);
        assert!(tokens.verify(&token, &keys).is_none());
    }

    #[test]
    fn a_key_replaced_under_the_same_id_does_not_keep_its_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let keys = Keys::default();
        let tokens = StreamTokens::new(&MasterKey::load(None, dir.path()).unwrap(), keys.clone());
        keys.insert(&crate::keys::bootstrap_record("the first bootstrap key"));
        let session = Uuid::now_v7();
        let (token, _) = tokens.mint(session, crate::keys::BOOTSTRAP_ID);
        assert!(tokens.verify(&token, &keys).is_some());
        keys.insert(&crate::keys::bootstrap_record("the second bootstrap key"));
        assert!(tokens.verify(&token, &keys).is_none(), "rotated away");
    }
}
