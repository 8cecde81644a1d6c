//! Stream tokens: short-lived, session-scoped credentials for the event
//! stream only, for browsers whose `EventSource` cannot send headers.
//!
//! A token is `st1.<session>.<expiry unix seconds>.<key id>.<HMAC-SHA256>`,
//! signed with a key derived from the master key (so tokens survive a
//! restart). It carries the id of the key that minted it: revoking that key
//! revokes its tokens. The signature also covers the key's stored hash
//! (not in the token): a key replaced under the same id (the bootstrap key,
//! rotated by a restart) does not keep the old key's tokens valid. An end
//! user's token is bound the same way to the user's revocation
//! (`end_users::revocation`): revoking the user's tokens revokes the stream
//! tokens they were given before.

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
    /// as `keys` holds it now, or for an end user (who names no key) to
    /// their revocation (`revoked`, Unix ms), if they have one.
    fn mac(&self, body: &str, key_id: &str, keys: &Keys, revoked: Option<u64>) -> Hmac<Sha256> {
        let bound = match revoked {
            Some(ms) if key_id.starts_with(END_USER_KEY_PREFIX) => format!("revoked {ms}"),
            _ => keys.hash_of(key_id).map(hex::encode).unwrap_or_default(),
        };
        crate::secrets::hmac(&self.key, format!("{body}\n{bound}").as_bytes())
    }

    /// A token for `session`, minted by key `key_id` (for an end user,
    /// `revoked`: their revocation, if any); returns it and its expiry as
    /// an RFC 3339 timestamp.
    pub(crate) fn mint(
        &self,
        session: Uuid,
        key_id: &str,
        revoked: Option<u64>,
    ) -> (String, String) {
        let expires = unix_now() + TOKEN_TTL.as_secs();
        let (token, _) = self.mint_until(session, key_id, expires, revoked);
        let at = UNIX_EPOCH + Duration::from_secs(expires);
        (token, humantime::format_rfc3339_seconds(at).to_string())
    }

    fn mint_until(
        &self,
        session: Uuid,
        key_id: &str,
        expires: u64,
        revoked: Option<u64>,
    ) -> (String, u64) {
        let body = format!("st1.{}.{expires}.{key_id}", session.simple());
        let tag = hex::encode(
            self.mac(&body, key_id, &self.keys, revoked)
                .finalize()
                .into_bytes(),
        );
        (format!("{body}.{tag}"), expires)
    }

    /// The key id a token names, unverified: an end user's, whose
    /// revocation `verify` then needs.
    pub(crate) fn key_of(token: &str) -> Option<&str> {
        let (body, _) = token.rsplit_once('.')?;
        body.split('.').nth(3)
    }

    /// The principal of a valid, unexpired token whose minting key still
    /// exists (for an end user: minted after their revocation `revoked`).
    pub(crate) fn verify(
        &self,
        token: &str,
        keys: &Keys,
        revoked: Option<u64>,
    ) -> Option<Principal> {
        let (body, tag) = token.rsplit_once('.')?;
        let mut parts = body.split('.');
        let (version, session, expires, key_id) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version != "st1" || parts.next().is_some() {
            return None;
        }
        let tag = hex::decode(tag).ok()?;
        (self.mac(body, key_id, keys, revoked))
            .verify_slice(&tag)
            .ok()?;
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
            source: None,
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
        let (token, _) = tokens.mint(session, &key.record.id, None);
        let principal = tokens.verify(&token, &keys, None).unwrap();
        assert_eq!(principal.scope, Scope::Session(session));
        let mut forged = token.clone();
        forged.replace_range(4..5, if &token[4..5] == "0" { "1" } else { "0" });
        assert!(tokens.verify(&forged, &keys, None).is_none());
        assert!(tokens.verify("st1.x.y.z.00", &keys, None).is_none());
        let (expired, _) = tokens.mint_until(session, &key.record.id, unix_now() - 1, None);
        assert!(tokens.verify(&expired, &keys, None).is_none(), "expired");
        keys.remove(&key.record.id);
        assert!(tokens.verify(&token, &keys, None).is_none());
    }

    #[test]
    fn a_key_replaced_under_the_same_id_does_not_keep_its_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let keys = Keys::default();
        let tokens = StreamTokens::new(&MasterKey::load(None, dir.path()).unwrap(), keys.clone());
        keys.insert(&crate::keys::bootstrap_record("the first bootstrap key"));
        let session = Uuid::now_v7();
        let (token, _) = tokens.mint(session, crate::keys::BOOTSTRAP_ID, None);
        assert!(tokens.verify(&token, &keys, None).is_some());
        keys.insert(&crate::keys::bootstrap_record("the second bootstrap key"));
        assert!(tokens.verify(&token, &keys, None).is_none(), "rotated away");
    }

    #[test]
    fn an_end_users_tokens_end_with_their_revocation() {
        let dir = tempfile::tempdir().unwrap();
        let keys = Keys::default();
        let tokens = StreamTokens::new(&MasterKey::load(None, dir.path()).unwrap(), keys.clone());
        let session = Uuid::now_v7();
        let user = crate::keys::end_user_key(Uuid::now_v7(), "ada");
        let (before, _) = tokens.mint(session, &user, None);
        assert_eq!(StreamTokens::key_of(&before), Some(user.as_str()));
        assert!(tokens.verify(&before, &keys, None).is_some());
        assert!(tokens.verify(&before, &keys, Some(5)).is_none(), "revoked");
        let (after, _) = tokens.mint(session, &user, Some(5));
        assert!(tokens.verify(&after, &keys, Some(5)).is_some());
        assert!(
            tokens.verify(&after, &keys, Some(6)).is_none(),
            "revoked again"
        );
    }
}
