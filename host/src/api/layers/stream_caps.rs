//! The cap on event streams open at once per API key and per end user
//! (`--max-streams-per-key`, `--max-streams-per-end-user`): one more open
//! gets 429 `too_many_streams` and nothing is read. A stream holds its
//! place until its response body is dropped (the client went away, the
//! stream ended, or the server stopped).
//!
//! Counted by the principal's `key_id`: a key's streams and those of the
//! stream tokens it minted share one count, as an end user's do (their
//! `key_id` is `user:<app>:<hash>`). The bare invocation key's streams
//! (and its stream tokens') are also counted per client address
//! (`client_addr::visitor`), each address held to the end user's cap: one
//! visitor holding idle sockets cannot take every visitor's places. The
//! map holds only keys and addresses with a stream open, so it is bounded
//! by the streams themselves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use crate::api::{ApiError, AppState, ErrorCode};
use crate::keys::{END_USER_KEY_PREFIX, Principal};

/// Streams one API key may hold open at once unless the operator says otherwise.
pub(crate) const DEFAULT_PER_KEY: usize = 1000;
/// Streams one end user may hold open at once unless the operator says otherwise.
pub(crate) const DEFAULT_PER_END_USER: usize = 16;

/// The operator's caps (`0`: no cap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCaps {
    pub per_key: usize,
    pub per_end_user: usize,
}

impl Default for StreamCaps {
    fn default() -> Self {
        StreamCaps {
            per_key: DEFAULT_PER_KEY,
            per_end_user: DEFAULT_PER_END_USER,
        }
    }
}

/// The streams open now, per `key_id`.
pub(crate) struct StreamSlots {
    caps: StreamCaps,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// One open stream's places (its key's, and its address's for the bare
/// invocation key); gives them back when dropped.
struct Slot {
    keys: Vec<String>,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        for key in &self.keys {
            if let Some(count) = open.get_mut(key) {
                *count -= 1;
                if *count == 0 {
                    open.remove(key);
                }
            }
        }
    }
}

/// Why a stream was refused: the cap, the flag that sets it, and the
/// refusal's message.
type Refused = (usize, &'static str, String);

impl StreamSlots {
    pub(crate) fn new(caps: StreamCaps) -> StreamSlots {
        StreamSlots {
            caps,
            open: Arc::default(),
        }
    }

    /// A place for one more stream of `principal` (from `visitor`, the
    /// bare invocation key's client address), or the cap it is at (and
    /// the flag that sets it).
    fn take(&self, principal: &Principal, visitor: Option<&str>) -> Result<Option<Slot>, Refused> {
        let end_user = principal.key_id.starts_with(END_USER_KEY_PREFIX);
        let (cap, flag, who) = if end_user {
            (
                self.caps.per_end_user,
                "--max-streams-per-end-user",
                "end user".to_string(),
            )
        } else {
            (
                self.caps.per_key,
                "--max-streams-per-key",
                "API key".to_string(),
            )
        };
        let mut wanted = Vec::new();
        if cap > 0 {
            let message = format!(
                "this {who} has {cap} event streams open, its cap ({flag} {cap}): close one first"
            );
            wanted.push((principal.key_id.clone(), cap, flag, message));
        }
        if let Some(address) = visitor.filter(|_| self.caps.per_end_user > 0) {
            let (cap, flag) = (self.caps.per_end_user, "--max-streams-per-end-user");
            let message = format!(
                "this invocation key has {cap} event streams open from address {address}, its share per address ({flag} {cap}): close one first"
            );
            wanted.push((
                format!("{}@{address}", principal.key_id),
                cap,
                flag,
                message,
            ));
        }
        if wanted.is_empty() {
            return Ok(None);
        }
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        for (key, cap, flag, message) in &wanted {
            if open.get(key).copied().unwrap_or(0) >= *cap {
                return Err((*cap, flag, message.clone()));
            }
        }
        let keys: Vec<String> = wanted.into_iter().map(|(key, ..)| key).collect();
        for key in &keys {
            *open.entry(key.clone()).or_default() += 1;
        }
        Ok(Some(Slot {
            keys,
            open: self.open.clone(),
        }))
    }

    /// Streams open now under `key_id` (for tests).
    #[cfg(test)]
    fn count(&self, key_id: &str) -> usize {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(key_id).copied().unwrap_or(0)
    }
}

/// The middleware of the rows that stream (`Layers::streams`: the
/// `…/events` streams, AG-UI runs and MCP, whose `tools/call` streams its
/// turn), after authentication and the rate limit.
pub(crate) async fn cap(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(principal) = request.extensions().get::<Principal>() else {
        return next.run(request).await;
    };
    let visitor = super::client_addr::visitor(principal, &state.keys);
    let slot = match state.streams.take(principal, visitor.as_deref()) {
        Ok(slot) => slot,
        Err((_, _, message)) => {
            crate::metrics::get().streams_refused.inc();
            return ApiError::new(ErrorCode::TooManyStreams, message).into_response();
        }
    };
    let response = next.run(request).await;
    let Some(slot) = slot else {
        return response;
    };
    if response.status() != StatusCode::OK {
        return response;
    }
    // The place is held as long as the body: until the stream is dropped.
    response.map(|body| {
        Body::from_stream(body.into_data_stream().map(move |frame| {
            let _held = &slot;
            frame
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Scope;

    fn principal(key_id: &str) -> Principal {
        Principal {
            key_id: key_id.into(),
            name: "k".into(),
            scope: Scope::Platform,
            user: None,
            source: None,
        }
    }

    #[test]
    fn a_key_holds_at_most_its_cap_and_a_dropped_stream_frees_its_place() {
        let slots = StreamSlots::new(StreamCaps {
            per_key: 2,
            per_end_user: 1,
        });
        let key = principal("k1");
        let first = slots.take(&key, None).unwrap();
        let second = slots.take(&key, None).unwrap();
        assert!(slots.take(&key, None).is_err(), "the third is over the cap");
        assert!(
            slots.take(&principal("k2"), None).is_ok(),
            "another key's own count"
        );
        let user = principal("user:app:hash");
        let held = slots.take(&user, None).unwrap();
        assert!(
            slots.take(&user, None).is_err(),
            "an end user's cap is their own"
        );
        drop(first);
        assert_eq!(slots.count("k1"), 1);
        assert!(slots.take(&key, None).is_ok());
        drop((second, held));
        assert_eq!(slots.count("user:app:hash"), 0);
        assert!(
            slots.open.lock().unwrap().is_empty(),
            "no entry is left behind"
        );
    }

    #[test]
    fn the_bare_key_is_also_counted_per_address_at_the_end_users_cap() {
        let slots = StreamSlots::new(StreamCaps {
            per_key: 3,
            per_end_user: 2,
        });
        let key = principal("inv");
        let a = [
            slots.take(&key, Some("192.0.2.1")).unwrap(),
            slots.take(&key, Some("192.0.2.1")).unwrap(),
        ];
        let (_, flag, message) = slots.take(&key, Some("192.0.2.1")).err().unwrap();
        assert_eq!(flag, "--max-streams-per-end-user");
        assert!(
            message.contains("address 192.0.2.1, its share"),
            "{message}"
        );
        // Another address still gets in, up to the key's own cap.
        let b = slots.take(&key, Some("198.51.100.2")).unwrap();
        let (_, flag, _) = slots.take(&key, Some("198.51.100.3")).err().unwrap();
        assert_eq!(flag, "--max-streams-per-key");
        drop((a, b));
        assert!(slots.open.lock().unwrap().is_empty());
    }

    #[test]
    fn a_zero_cap_counts_nothing() {
        let slots = StreamSlots::new(StreamCaps {
            per_key: 0,
            per_end_user: 0,
        });
        for _ in 0..10 {
            assert!(slots.take(&principal("k"), None).unwrap().is_none());
        }
        assert_eq!(slots.count("k"), 0);
    }
}
