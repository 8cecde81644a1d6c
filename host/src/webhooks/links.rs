//! Decision links: `approval.requested` sent to an endpoint that opted in
//! carries two URLs (approve, deny) that decide that one call without an
//! API key. A link is a token signed by a key derived from the master key,
//! naming the endpoint and its link generation (bumped by every rotation of
//! its secret, which kills the links it gave before), the session, the seq
//! of the call's TOOL_APPROVAL_REQUIRED, the decision, the link's own end
//! (`--decision-link-ttl` after the event, 24 h by default) and the
//! approval's deadline; it decides only while that very call is pending
//! (after, 409), and neither past its own end nor past the deadline (410).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::Mac;
use uuid::Uuid;

use crate::secrets::{MasterKey, hmac};

/// What a link says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    pub webhook: Uuid,
    pub session: Uuid,
    /// The seq of the call's TOOL_APPROVAL_REQUIRED.
    pub seq: u64,
    pub approve: bool,
    /// The endpoint's link generation when the link was made.
    pub generation: u64,
    /// The link's own end (Unix ms).
    pub until_ms: u64,
    /// The approval's deadline (RFC 3339), if it has one.
    pub expires_at: Option<String>,
}

/// The key links are signed with. v2: the claim holds the generation and
/// the link's end, and links signed before (by v1) verify no more.
pub(crate) fn key(master: &MasterKey) -> [u8; 32] {
    master.derive("agenthost webhook decision links v2")
}

/// The link's token: the claim, `.`, its HMAC, both base64url.
pub(crate) fn token(key: &[u8; 32], claim: &Claim) -> String {
    let text = format!(
        "{}.{}.{}.{}.{}.{}.{}",
        claim.webhook.simple(),
        claim.session.simple(),
        claim.seq,
        if claim.approve { "a" } else { "d" },
        claim.generation,
        claim.until_ms,
        claim.expires_at.as_deref().unwrap_or("")
    );
    let mac = hmac(key, text.as_bytes()).finalize().into_bytes();
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(text),
        URL_SAFE_NO_PAD.encode(mac)
    )
}

/// The claim of a token whose signature holds; `None` for anything else.
pub(crate) fn verify(key: &[u8; 32], token: &str) -> Option<Claim> {
    let (text, mac) = token.split_once('.')?;
    let text = URL_SAFE_NO_PAD.decode(text).ok()?;
    let mac = URL_SAFE_NO_PAD.decode(mac).ok()?;
    hmac(key, &text).verify_slice(&mac).ok()?;
    let text = String::from_utf8(text).ok()?;
    let mut parts = text.splitn(7, '.');
    let webhook = parts.next()?.parse().ok()?;
    let session = parts.next()?.parse().ok()?;
    let seq = parts.next()?.parse().ok()?;
    let approve = match parts.next()? {
        "a" => true,
        "d" => false,
        _ => return None,
    };
    let generation = parts.next()?.parse().ok()?;
    let until_ms = parts.next()?.parse().ok()?;
    let expires_at = Some(parts.next()?.to_string()).filter(|e| !e.is_empty());
    Some(Claim {
        webhook,
        session,
        seq,
        approve,
        generation,
        until_ms,
        expires_at,
    })
}

/// A keyed hash of the address a link was used from, journaled with its
/// decision (`address_hash`): the same address gives the same value on
/// every host sharing the master key, and the address cannot be read back
/// from the journal (the key is the server's). 32 hex digits.
pub(crate) fn address_hash(key: &[u8; 32], address: std::net::IpAddr) -> String {
    let mac = hmac(key, format!("decision address {address}").as_bytes())
        .finalize()
        .into_bytes();
    mac[..16].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_its_claim_and_nothing_else_verifies() {
        let key = [7u8; 32];
        let claim = Claim {
            webhook: Uuid::now_v7(),
            session: Uuid::now_v7(),
            seq: 12,
            approve: true,
            generation: 3,
            until_ms: 1_800_000_000_000,
            expires_at: Some("2026-11-22T11:00:00.000Z".into()),
        };
        let token = token(&key, &claim);
        assert_eq!(verify(&key, &token), Some(claim.clone()));
        assert_eq!(verify(&[8u8; 32], &token), None, "another key");
        // The decision flipped, the signature kept: refused.
        let deny = super::token(
            &key,
            &Claim {
                approve: false,
                ..claim.clone()
            },
        );
        let forged = format!(
            "{}.{}",
            deny.split_once('.').unwrap().0,
            token.split_once('.').unwrap().1
        );
        assert_eq!(verify(&key, &forged), None);
        // Nor an older generation under this one's signature.
        let older = super::token(
            &key,
            &Claim {
                generation: 2,
                ..claim.clone()
            },
        );
        let forged = format!(
            "{}.{}",
            older.split_once('.').unwrap().0,
            token.split_once('.').unwrap().1
        );
        assert_eq!(verify(&key, &forged), None);
        assert_eq!(verify(&key, "garbage"), None);
    }
}
