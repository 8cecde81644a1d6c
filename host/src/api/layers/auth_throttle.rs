//! Throttling failed authentication per source address
//! (`--auth-failures-per-minute`): once an address has failed that many
//! times in its current minute, every request from it that presents a
//! credential gets `429 too_many_auth_failures` with `Retry-After` until the
//! minute is over, before the credential is even checked, so a key cannot
//! be guessed online faster than that.
//!
//! Addresses are counted in fixed one-minute windows; an IPv6 address by
//! its /64 (one host usually holds a whole /64). Memory is bounded: at most
//! `MAX_TRACKED` addresses are counted at once; when full, finished windows
//! are dropped first, and an address that still finds no room is not
//! counted (documented in docs/limits.md).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{PoisonError, RwLock};
use std::time::{Duration, Instant};

/// Failures per address per minute unless the operator says otherwise.
pub(crate) const DEFAULT_PER_MINUTE: u32 = 300;
/// Addresses counted at once, at most.
const MAX_TRACKED: usize = 65_536;
const WINDOW: Duration = Duration::from_secs(60);

/// The failures of each address in its current window.
pub(crate) struct AuthThrottle {
    per_minute: u32,
    /// Read on every authenticated request, written only on failures.
    windows: RwLock<HashMap<IpAddr, (Instant, u32)>>,
}

/// The key an address is counted under: itself, or its /64 for IPv6.
fn bucket(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(bits.into())
            }
        },
        v4 => v4,
    }
}

impl AuthThrottle {
    /// `per_minute` 0 turns the throttle off.
    pub(crate) fn new(per_minute: u32) -> AuthThrottle {
        AuthThrottle {
            per_minute,
            windows: RwLock::default(),
        }
    }

    /// How long `ip` must wait before it may try again, if it is throttled.
    pub(crate) fn blocked(&self, ip: IpAddr) -> Option<Duration> {
        if self.per_minute == 0 {
            return None;
        }
        let windows = self.windows.read().unwrap_or_else(PoisonError::into_inner);
        let (start, failures) = windows.get(&bucket(ip))?;
        let left = WINDOW.checked_sub(start.elapsed())?;
        (*failures >= self.per_minute).then_some(left)
    }

    /// Counts one failed authentication of `ip`.
    pub(crate) fn failed(&self, ip: IpAddr) {
        if self.per_minute == 0 {
            return;
        }
        let now = Instant::now();
        let mut windows = self.windows.write().unwrap_or_else(PoisonError::into_inner);
        let key = bucket(ip);
        if !windows.contains_key(&key) && windows.len() >= MAX_TRACKED {
            windows.retain(|_, (start, _)| now.duration_since(*start) < WINDOW);
            if windows.len() >= MAX_TRACKED {
                return;
            }
        }
        let entry = windows.entry(key).or_insert((now, 0));
        if now.duration_since(entry.0) >= WINDOW {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }

    /// The limit, for the refusal's message.
    pub(crate) fn per_minute(&self) -> u32 {
        self.per_minute
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_blocked_after_its_failures_and_others_are_not() {
        let throttle = AuthThrottle::new(3);
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        for _ in 0..2 {
            throttle.failed(ip);
            assert!(throttle.blocked(ip).is_none());
        }
        throttle.failed(ip);
        let wait = throttle.blocked(ip).expect("blocked after 3");
        assert!(wait <= WINDOW);
        assert!(throttle.blocked("192.0.2.8".parse().unwrap()).is_none());
        // One /64 is one address.
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        for _ in 0..3 {
            throttle.failed(a);
        }
        assert!(
            throttle
                .blocked("2001:db8::ffff:1".parse().unwrap())
                .is_some()
        );
        assert!(
            throttle
                .blocked("2001:db8:0:1::1".parse().unwrap())
                .is_none()
        );
        assert!(AuthThrottle::new(0).blocked(ip).is_none(), "0 is off");
    }

    #[test]
    fn memory_stays_bounded_under_many_addresses() {
        let throttle = AuthThrottle::new(1);
        for i in 0..(MAX_TRACKED as u32 + 1000) {
            throttle.failed(IpAddr::V4(i.into()));
        }
        let windows = throttle.windows.read().unwrap();
        assert_eq!(windows.len(), MAX_TRACKED);
    }
}
