//! The after-commit fan-out: one broadcast channel per watched session, and
//! a watch on the approvals feed's head.
//!
//! The writer publishes each committed event here (never before its commit);
//! streams subscribe before they read redb, so nothing falls between replay
//! and tail.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{broadcast, watch};
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
    channels: Mutex<HashMap<Uuid, Channel>>,
    /// The approvals feed's newest seq this host knows committed. Feed
    /// streams wake on it and read the feed itself from the engine, so a
    /// wake-up carries no entry and a missed one only delays.
    feed: watch::Sender<u64>,
}

struct Channel {
    tx: broadcast::Sender<StoredEvent>,
    subscribers: usize,
    /// The seq after the newest event published, once one was.
    next: Option<u64>,
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
        let channel = channels.entry(session).or_insert_with(|| Channel {
            tx: broadcast::channel(CHANNEL_CAPACITY).0,
            subscribers: 0,
            next: None,
        });
        channel.subscribers += 1;
        let rx = channel.tx.subscribe();
        Subscription {
            hub: self.clone(),
            session,
            rx,
        }
    }

    /// Publishes committed events, in seq order per session. An event
    /// older than one already published is skipped (with several hosts,
    /// the listener and the writer may both bring it).
    pub fn publish(&self, events: &[(Uuid, StoredEvent)]) {
        let mut channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        if channels.is_empty() {
            return;
        }
        for (session, event) in events {
            if let Some(channel) = channels.get_mut(session) {
                if channel.next.is_some_and(|next| event.seq < next) {
                    continue;
                }
                channel.next = Some(event.seq + 1);
                // No receiver left is fine: the channel is about to be dropped.
                let _ = channel.tx.send(event.clone());
            }
        }
    }

    /// The feed reached `head` (committed): wakes its streams.
    pub fn feed_advanced(&self, head: u64) {
        self.feed.send_if_modified(|known| {
            let newer = head > *known;
            *known = (*known).max(head);
            newer
        });
    }

    /// Wakes every feed stream to read again (after a listener reconnected,
    /// when anything may have been committed meanwhile).
    pub fn feed_recheck(&self) {
        self.feed.send_modify(|_| {});
    }

    /// A receiver that wakes when the feed may have advanced.
    pub fn feed_watch(&self) -> watch::Receiver<u64> {
        self.feed.subscribe()
    }

    /// Ends every stream of a deleted session.
    pub fn close(&self, session: Uuid) {
        let mut channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        // Dropping the sender ends each subscription with `Closed`.
        channels.remove(&session);
    }

    /// Where to read from to publish events `first..=last` of a session:
    /// `None` when nobody watches it or they are published already.
    pub fn missing(&self, session: Uuid, first: u64, last: u64) -> Option<u64> {
        let channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        let channel = channels.get(&session)?;
        match channel.next {
            Some(next) if next > last => None,
            Some(next) => Some(next),
            None => Some(first),
        }
    }

    /// The sessions watched now.
    pub fn watched(&self) -> Vec<Uuid> {
        let channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        channels.keys().copied().collect()
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
        if let Some(channel) = channels.get_mut(&self.session) {
            // Saturating: `close` may have replaced the channel this one counted in.
            channel.subscribers = channel.subscribers.saturating_sub(1);
            if channel.subscribers == 0 {
                channels.remove(&self.session);
            }
        }
    }
}
