//! A host's listener: one connection LISTENing on the `agenthost` channel.
//! Every commit of every host announces what it changed; the listener hands
//! each announcement to the host (`Change`), which wakes its streams,
//! refreshes its keys or its secrets. The journal is read from PostgreSQL
//! itself, so a missed announcement can delay an event but never lose or
//! reorder it: after a reconnect the host hears `Reconnected` and catches up.

use std::time::Duration;

use fallible_iterator::FallibleIterator;
use uuid::Uuid;

use super::{CHANNEL, describe};
use crate::store::StoreError;

/// What another transaction committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// Events `first..=last` of a session.
    Events {
        session: Uuid,
        first: u64,
        last: u64,
    },
    /// An API key was stored or revoked.
    Key(String),
    /// A secret was stored or deleted.
    Secret(String),
    /// An app's record changed (its current deployment).
    App(Uuid),
    /// A session was deleted: its streams end.
    Deleted(Uuid),
    /// Cancel `turn` of `session` if it runs here; `by` names who asked.
    Cancel {
        session: Uuid,
        turn: u32,
        by: String,
    },
    /// The approvals feed reached this seq.
    Feed(u64),
    /// An end user's tokens issued at or before `not_before_ms` were
    /// revoked (`user_key`: their `Principal::key_id`).
    EndUserRevoked {
        user_key: String,
        not_before_ms: u64,
    },
    /// The listener lost its connection and has it again: anything may
    /// have changed meanwhile.
    Reconnected,
}

impl Change {
    fn parse(payload: &str) -> Option<Change> {
        let (kind, rest) = payload.split_once(':')?;
        Some(match kind {
            "e" => {
                let mut parts = rest.split(':');
                let session = parts.next()?.parse().ok()?;
                let first = parts.next()?.parse().ok()?;
                let last = parts.next()?.parse().ok()?;
                Change::Events {
                    session,
                    first,
                    last,
                }
            }
            "k" => Change::Key(rest.to_string()),
            "s" => Change::Secret(rest.to_string()),
            "a" => Change::App(rest.parse().ok()?),
            "d" => Change::Deleted(rest.parse().ok()?),
            "f" => Change::Feed(rest.parse().ok()?),
            "u" => {
                let (ms, user_key) = rest.split_once(':')?;
                Change::EndUserRevoked {
                    user_key: user_key.to_string(),
                    not_before_ms: ms.parse().ok()?,
                }
            }
            "c" => {
                let mut parts = rest.splitn(3, ':');
                Change::Cancel {
                    session: parts.next()?.parse().ok()?,
                    turn: parts.next()?.parse().ok()?,
                    by: parts.next()?.to_string(),
                }
            }
            _ => return None,
        })
    }

    /// The announcement of a deleted session.
    pub(super) fn deleted_note(session: Uuid) -> String {
        format!("d:{session}")
    }

    /// The request to cancel `turn` of `session` (NOTIFY payloads are
    /// short: `by` is cut to 200 bytes).
    pub(super) fn cancel_note(session: Uuid, turn: u32, by: &str) -> String {
        let mut by = by.to_string();
        crate::util::truncate_utf8(&mut by, 200);
        format!("c:{session}:{turn}:{by}")
    }

    /// The announcement of an end user's revocation.
    pub(super) fn revoked_user_note(user_key: &str, not_before_ms: u64) -> String {
        format!("u:{not_before_ms}:{user_key}")
    }

    /// The announcement of the approvals feed's new head.
    pub(super) fn feed_note(head: u64) -> String {
        format!("f:{head}")
    }

    /// The announcement of events `first..=last` of `session`.
    pub(super) fn events_note(session: Uuid, first: u64, last: u64) -> String {
        format!("e:{session}:{first}:{last}")
    }
}

/// Starts the listener thread; `changed` runs on it for every change.
pub(super) fn spawn(
    target: super::Target,
    changed: Box<dyn Fn(Change) + Send>,
) -> Result<(), StoreError> {
    std::thread::Builder::new()
        .name("pg-listener".into())
        .spawn(move || {
            let mut connected_before = false;
            let mut backoff = Duration::from_millis(100);
            loop {
                let mut client = match target.connect() {
                    Ok(client) => client,
                    Err(err) => {
                        tracing::warn!(error = %describe(&err), "listener cannot reach PostgreSQL");
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                        continue;
                    }
                };
                if let Err(err) = client.batch_execute(&format!("LISTEN {CHANNEL}")) {
                    tracing::warn!(error = %describe(&err), "cannot LISTEN");
                    continue;
                }
                backoff = Duration::from_millis(100);
                if connected_before {
                    changed(Change::Reconnected);
                }
                connected_before = true;
                loop {
                    let mut notifications = client.notifications();
                    let mut iter = notifications.timeout_iter(Duration::from_secs(1));
                    match iter.next() {
                        Ok(Some(note)) => {
                            if let Some(change) = Change::parse(note.payload()) {
                                changed(change);
                            }
                        }
                        Ok(None) => {
                            drop(iter);
                            drop(notifications);
                            // Idle: make sure the connection is still there.
                            if client.is_closed() || client.simple_query("").is_err() {
                                break;
                            }
                        }
                        Err(err) => {
                            tracing::warn!(error = %describe(&err), "listener lost its connection");
                            break;
                        }
                    }
                }
            }
        })
        .map_err(|e| StoreError::Storage(format!("cannot start the listener: {e}")))?;
    Ok(())
}
