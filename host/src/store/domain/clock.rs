//! The domain's clock helpers: Unix milliseconds of a time, and Unix ms as
//! RFC 3339 with milliseconds (a schedule's `at`, a revocation's
//! not-before), for every rule file to use without importing another.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Unix milliseconds of `time` (0 before the epoch).
pub(crate) fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Unix ms as RFC 3339 (UTC, milliseconds), as a schedule's `at` shows it.
pub(crate) fn rfc3339_ms(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}
