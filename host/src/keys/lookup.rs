//! Keys this host has not heard of yet. With several hosts on one
//! PostgreSQL, a key minted on one host reaches the others' registries by
//! its announcement, a few milliseconds later; a client that mints a key
//! and uses it at once through another host must not get 401 meanwhile. So
//! a well-formed key whose id the registry lacks is looked up in the store
//! before the request is refused (read-your-writes).
//!
//! That lookup is bounded, so a flood of unknown keys costs what it cost
//! before (a map lookup): an id found absent is remembered for
//! `MISS_TTL` (at most `MISSES_MAX` ids), and a host looks up at most
//! `LOOKUPS_PER_SEC` unknown ids a second; past that an unknown key is
//! refused without one (docs/limits.md). A key revoked while its lookup was
//! under way is never put back (`Keys::removals`).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use super::{Keys, Principal, parse_id};
use crate::store::Db;

/// How long an id found absent from the store is refused without a lookup.
pub(crate) const MISS_TTL: Duration = Duration::from_secs(60);
/// Ids found absent that a host remembers at most.
pub(crate) const MISSES_MAX: usize = 10_000;
/// Store lookups of unknown keys a host makes a second, at most.
pub(crate) const LOOKUPS_PER_SEC: u32 = 50;

/// The negative cache and the lookups' budget.
pub(crate) struct Misses {
    absent: Mutex<HashMap<String, Instant>>,
    budget: DefaultDirectRateLimiter,
}

impl Default for Misses {
    fn default() -> Self {
        let rate = NonZeroU32::new(LOOKUPS_PER_SEC).unwrap_or(NonZeroU32::MIN);
        Misses {
            absent: Mutex::default(),
            budget: RateLimiter::direct(Quota::per_second(rate)),
        }
    }
}

impl Misses {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.absent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `id` was found absent less than `MISS_TTL` ago.
    fn recent(&self, id: &str) -> bool {
        self.lock()
            .get(id)
            .is_some_and(|at| at.elapsed() < MISS_TTL)
    }

    fn remember(&self, id: &str) {
        let mut absent = self.lock();
        if absent.len() >= MISSES_MAX {
            absent.retain(|_, at| at.elapsed() < MISS_TTL);
            if absent.len() >= MISSES_MAX {
                // A flood of distinct ids: the budget bounds the lookups.
                absent.clear();
            }
        }
        absent.insert(id.to_string(), Instant::now());
    }

    /// A key stored since (announced by another host, or looked up).
    pub(super) fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }
}

impl Keys {
    /// `verify`, and for a well-formed key whose id this host has not heard
    /// of, a look in the store first (see the module's comment).
    pub(crate) async fn verify_fresh(&self, presented: &str, store: &Db) -> Option<Principal> {
        if let Some(found) = self.verify(presented) {
            return Some(found);
        }
        let id = parse_id(presented)?;
        if self.contains(id) {
            // Heard of since `verify` (the announcement won the race), or
            // a wrong secret: the registry decides.
            return self.verify(presented);
        }
        if self.misses.recent(id) || self.misses.budget.check().is_err() {
            return None;
        }
        // Twice at most: a removal of any key while the first lookup was
        // under way keeps its record out of the registry.
        for _ in 0..2 {
            let removals = self.removals.load(Ordering::SeqCst);
            let wanted = id.to_string();
            let record = match store.read(move |s| s.api_key(&wanted)).await {
                Ok(record) => record,
                Err(err) => {
                    tracing::debug!(error = %err, "cannot look an unknown key up");
                    return None;
                }
            };
            let Some(record) = record else {
                self.misses.remember(id);
                return None;
            };
            if self.insert_unless_removed(&record, removals) {
                break;
            }
        }
        self.verify(presented)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_negative_cache_is_bounded() {
        let misses = Misses::default();
        for i in 0..MISSES_MAX + 10 {
            misses.remember(&format!("{i:016x}"));
        }
        assert!(misses.len() <= MISSES_MAX);
        assert!(misses.recent(&format!("{:016x}", MISSES_MAX + 9)));
        misses.forget(&format!("{:016x}", MISSES_MAX + 9));
        assert!(!misses.recent(&format!("{:016x}", MISSES_MAX + 9)));
    }

    #[test]
    fn lookups_are_budgeted() {
        let misses = Misses::default();
        let allowed = (0..LOOKUPS_PER_SEC * 4)
            .filter(|_| misses.budget.check().is_ok())
            .count();
        assert!(
            (1..=LOOKUPS_PER_SEC as usize).contains(&allowed),
            "{allowed}"
        );
    }
}
