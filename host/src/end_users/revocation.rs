//! Revoked end users: each user's not-before (Unix ms; their tokens issued
//! at or before it are refused), as the store keeps it
//! (`store::domain::end_users`), cached on each host and checked on every
//! request an end user makes, directly or with a stream token.
//!
//! A user's not-before is read from the store the first time the host sees
//! them, then answered from the cache. A revocation reaches the cache of
//! the host that made it at once, and every other host's by its
//! announcement (PostgreSQL's NOTIFY, `cluster.rs`); after the listener
//! lost its connection the cache is emptied (anything may have changed).
//! A read that began before a revocation was applied never puts the older
//! value back (`generation`). At most `MAX_CACHED` users are held; past
//! that the cache starts again empty (docs/limits.md).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::store::{Db, StoreError};

/// Users whose not-before a host holds at most.
pub(crate) const MAX_CACHED: usize = 100_000;

#[derive(Default)]
struct Inner {
    /// By `Principal::key_id`: the not-before, or `None`: never revoked.
    users: Mutex<HashMap<String, Option<u64>>>,
    /// Revocations applied so far (changed under `users`' lock).
    generation: AtomicU64,
}

/// The hosts' view of revoked end users. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Revocations {
    inner: Arc<Inner>,
}

impl Revocations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<u64>>> {
        self.inner
            .users
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// End user `user_key`'s not-before, from the cache or the store.
    pub(crate) async fn not_before(
        &self,
        user_key: &str,
        store: &Db,
    ) -> Result<Option<u64>, StoreError> {
        if let Some(known) = self.lock().get(user_key) {
            return Ok(*known);
        }
        let generation = self.inner.generation.load(Ordering::SeqCst);
        let wanted = user_key.to_string();
        let stored = store.read(move |s| s.end_user_not_before(&wanted)).await?;
        let mut users = self.lock();
        if self.inner.generation.load(Ordering::SeqCst) == generation {
            if users.len() >= MAX_CACHED {
                users.clear();
            }
            users.insert(user_key.to_string(), stored);
        }
        Ok(stored)
    }

    /// Whether a token of `user_key` issued at `issued_ms` (Unix ms;
    /// `None`: unknown) is revoked.
    pub(crate) async fn revoked(
        &self,
        user_key: &str,
        issued_ms: Option<u64>,
        store: &Db,
    ) -> Result<bool, StoreError> {
        Ok(match self.not_before(user_key, store).await? {
            None => false,
            // A token that does not say when it was issued cannot show it
            // came after.
            Some(not_before) => issued_ms.is_none_or(|issued| issued <= not_before),
        })
    }

    /// Applies a revocation (made here, or announced by another host).
    pub(crate) fn apply(&self, user_key: &str, not_before_ms: u64) {
        let mut users = self.lock();
        self.inner.generation.fetch_add(1, Ordering::SeqCst);
        if users.len() >= MAX_CACHED && !users.contains_key(user_key) {
            users.clear();
        }
        let entry = users.entry(user_key.to_string()).or_insert(None);
        *entry = Some(entry.map_or(not_before_ms, |old| old.max(not_before_ms)));
    }

    /// Whether end user `user_key` was revoked at or after `opened_ms`, as
    /// this host holds it (no read): for a stream opened then that missed
    /// the revocation's broadcast (it lagged). Not an end user: `false`.
    pub(crate) fn revoked_since(&self, user_key: &str, opened_ms: u64) -> bool {
        user_key.starts_with(crate::keys::END_USER_KEY_PREFIX)
            && self
                .lock()
                .get(user_key)
                .is_some_and(|held| held.is_some_and(|not_before| not_before >= opened_ms))
    }

    /// Forgets everything (the listener reconnected: revocations may have
    /// been missed).
    pub(crate) fn forget_all(&self) {
        let mut users = self.lock();
        self.inner.generation.fetch_add(1, Ordering::SeqCst);
        users.clear();
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revocation_only_ever_moves_the_not_before_later_and_the_cache_is_bounded() {
        let revocations = Revocations::default();
        revocations.apply("user:a:1", 2_000);
        revocations.apply("user:a:1", 1_000);
        assert_eq!(revocations.lock().get("user:a:1"), Some(&Some(2_000)));
        // A stream opened before the revocation ends after a lag; one
        // opened after it (with a newer token) does not.
        assert!(revocations.revoked_since("user:a:1", 1_500));
        assert!(revocations.revoked_since("user:a:1", 2_000));
        assert!(!revocations.revoked_since("user:a:1", 2_001));
        assert!(!revocations.revoked_since("user:a:2", 0), "never revoked");
        assert!(
            !revocations.revoked_since("0123456789abcdef", 0),
            "an API key"
        );
        for i in 0..MAX_CACHED + 5 {
            revocations.apply(&format!("user:a:{i}"), 1);
        }
        assert!(revocations.len() <= MAX_CACHED);
        revocations.forget_all();
        assert_eq!(revocations.len(), 0);
    }
}
