//! The after-commit fan-out: one broadcast channel per watched session.
//!
//! The writer publishes each committed event here (never before its commit);
//! streams subscribe before they read redb, so nothing falls between replay
//! and tail.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::broadcast;
use uuid::Uuid;

use crate::journal::StoredEvent;

/// How many events a slow stream may fall behind before it re-reads redb.
/// Each watched session allocates this many slots up front; 1024 made the
/// channel the largest allocation of a short session (BENCHMARKS.md), and a
/// lagging stream loses nothing: it catches up from redb.
const CHANNEL_CAPACITY: usize = 128;

#[derive(Default)]
pub struct Hub {
    /// Per watched session: its channel and how many subscriptions hold it
    /// (counted under the lock, so the last one out always frees it).
    channels: Mutex<HashMap<Uuid, (broadcast::Sender<StoredEvent>, usize)>>,
}

/// A subscription; unsubscribes (and frees the channel when it was the last) on drop.
pub struct Subscription {
    hub: Arc<Hub>,
    session: Uuid,
    pub rx: broadcast::Receiver<StoredEvent>,
}

impl Hub {
    pub fn subscribe(self: &Arc<Self>, session: Uuid) -> Subscription {
        let mut channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        let (tx, count) = channels
            .entry(session)
            .or_insert_with(|| (broadcast::channel(CHANNEL_CAPACITY).0, 0));
        *count += 1;
        let rx = tx.subscribe();
        Subscription {
            hub: self.clone(),
            session,
            rx,
        }
    }

    /// Publishes committed events, in seq order per session.
    pub fn publish(&self, events: &[(Uuid, StoredEvent)]) {
        let channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        if channels.is_empty() {
            return;
        }
        for (session, event) in events {
            if let Some((tx, _)) = channels.get(session) {
                // No receiver left is fine: the channel is about to be dropped.
                let _ = tx.send(event.clone());
            }
        }
    }

    /// Number of sessions with at least one live subscription.
    pub fn watched_sessions(&self) -> usize {
        self.channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut channels = self
            .hub
            .channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((_, count)) = channels.get_mut(&self.session) {
            *count -= 1;
            if *count == 0 {
                channels.remove(&self.session);
            }
        }
    }
}
