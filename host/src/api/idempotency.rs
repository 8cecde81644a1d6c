//! The `Idempotency-Key` header of `POST /sessions`, `POST /sessions/{id}/input`,
//! `POST /sessions/{id}/approval` and `POST /deployments`: reading and
//! checking it, and the request's fingerprint the writer compares
//! (`store::domain::idempotency` holds the rule). Also a test-only fault:
//! the process exits right after a commit, before the response is written.

use std::sync::OnceLock;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, Method};
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};

use super::ApiError;
use crate::api::ErrorCode;
use crate::keys::Principal;
use crate::store::{Idempotency, MAX_KEY_LEN};

pub(super) const HEADER: HeaderName = HeaderName::from_static("idempotency-key");

/// A request's fingerprint: SHA-256 of its method, path and body (the
/// caller feeds the body: a JSON body in its canonical form, an upload part
/// by part).
pub(super) struct Fingerprint(Sha256);

impl Fingerprint {
    pub(super) fn new(method: &str, path: &str) -> Self {
        let mut hash = Sha256::new();
        hash.update(method.as_bytes());
        hash.update(b" ");
        hash.update(path.as_bytes());
        hash.update(b"\n");
        Fingerprint(hash)
    }

    pub(super) fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// One part of a multipart body: its name, its length, its bytes.
    pub(super) fn part(&mut self, name: &str, bytes: &[u8]) {
        self.part_start(name);
        self.update(&(bytes.len() as u64).to_be_bytes());
        self.update(bytes);
    }

    /// A part streamed in chunks: its name, then `update` per chunk.
    pub(super) fn part_start(&mut self, name: &str) {
        self.update(&(name.len() as u64).to_be_bytes());
        self.update(name.as_bytes());
    }

    fn finish(self) -> String {
        hex::encode(self.0.finalize())
    }

    /// The fingerprint of a JSON body: its canonical form (the body as the
    /// handler read it, serialized again: whitespace and key order do not
    /// count, the values do).
    pub(super) fn json(
        method: &str,
        path: &str,
        body: &impl serde::Serialize,
    ) -> Result<Self, ApiError> {
        let mut fingerprint = Fingerprint::new(method, path);
        fingerprint.update(&serde_json::to_vec(body).map_err(ApiError::internal)?);
        Ok(fingerprint)
    }
}

/// The request's `Idempotency-Key`, if it has one: 1 to 255 visible ASCII
/// characters (400 `invalid_idempotency_key` otherwise, or when repeated).
pub(super) fn key_of(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let mut values = headers.get_all(&HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let invalid = || {
        ApiError::new(
            ErrorCode::InvalidIdempotencyKey,
            format!(
                "`Idempotency-Key` must be given once, as 1 to {MAX_KEY_LEN} visible ASCII characters (no spaces)"
            ),
        )
    };
    if values.next().is_some() {
        return Err(invalid());
    }
    let bytes = value.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_KEY_LEN || !bytes.iter().all(u8::is_ascii_graphic) {
        return Err(invalid());
    }
    let key = value.to_str().map_err(|_| invalid())?;
    Ok(Some(key.to_owned()))
}

/// The writer's view of the key: scoped to the calling API key (an end
/// user's own namespace for an end user), with the request's fingerprint.
/// A bare invocation key's `Idempotency-Key` must be unguessable (422):
/// every end user of the app shares its namespace.
pub(super) fn idempotency(
    key: Option<String>,
    principal: &Principal,
    fingerprint: Fingerprint,
) -> Result<Option<Idempotency>, ApiError> {
    if let Some(key) = &key {
        super::caller::require_unguessable(principal, "an `Idempotency-Key`", key)?;
    }
    Ok(key.map(|key| Idempotency {
        key_id: principal.key_id.clone(),
        key,
        fingerprint: fingerprint.finish(),
    }))
}

/// A test-only fault, for the end-to-end test of a crash between a commit
/// and its response: when the server's environment sets
/// `AGENTHOST_TEST_EXIT_AFTER_COMMIT` to a path suffix, a `POST` whose path
/// ends with it and which succeeded ends the process (exit status 137, as
/// `kill -9`) before its response is written. Unset in any real deployment;
/// read once, and the router adds this layer only when it is set.
pub(super) fn exit_after_commit_suffix() -> Option<&'static str> {
    static SUFFIX: OnceLock<Option<String>> = OnceLock::new();
    SUFFIX
        .get_or_init(|| {
            std::env::var("AGENTHOST_TEST_EXIT_AFTER_COMMIT")
                .ok()
                .filter(|s| !s.is_empty())
        })
        .as_deref()
}

/// The layer of `exit_after_commit_suffix`.
pub(super) async fn exit_after_commit(request: Request, next: Next) -> Response {
    let suffix = exit_after_commit_suffix().unwrap_or_default();
    let hit = request.method() == Method::POST && request.uri().path().ends_with(suffix);
    let response = next.run(request).await;
    if hit && response.status().is_success() {
        tracing::warn!("AGENTHOST_TEST_EXIT_AFTER_COMMIT: exiting before the response");
        std::process::exit(137);
    }
    response
}
