//! Cron patterns of schedules (`schedules.rs`): checked when a schedule is
//! made, and the next due time after each firing, in the schedule's IANA
//! time zone (DST-correct: croner computes in the zone's local time).

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;

use crate::store::records::ScheduleRecord;

/// A cron pattern and its time zone, checked.
pub(crate) struct CronRule {
    cron: Cron,
    zone: Tz,
}

impl CronRule {
    /// Parses `pattern` (5 fields, or 6 with seconds first; `@daily` etc.)
    /// in `timezone` (an IANA name such as `Europe/Berlin`).
    pub(crate) fn parse(pattern: &str, timezone: &str) -> Result<Self, String> {
        let cron: Cron = (pattern.parse()).map_err(|err| format!("`cron` {pattern:?}: {err}"))?;
        let zone: Tz = (timezone.parse())
            .map_err(|_| format!("`timezone` {timezone:?} is not an IANA time zone name"))?;
        Ok(CronRule { cron, zone })
    }

    /// The first time the pattern matches strictly after `after_ms` (Unix
    /// ms), as Unix ms; `None` when it never matches again.
    pub(crate) fn next_after(&self, after_ms: u64) -> Option<u64> {
        let after = DateTime::<Utc>::from_timestamp_millis(i64::try_from(after_ms).ok()?)?;
        let local = after.with_timezone(&self.zone);
        let next = self.cron.find_next_occurrence(&local, false).ok()?;
        u64::try_from(next.timestamp_millis()).ok()
    }
}

/// When a schedule that was due at `due_ms` is due next, firing at
/// `now_ms`: a cron schedule's next time after both (one firing however
/// many times passed while no server ran), unless that is past its
/// `end_at`; a one-shot schedule never.
pub(super) fn next_due(record: &ScheduleRecord, due_ms: u64, now_ms: u64) -> Option<u64> {
    let cron = record.cron.as_deref()?;
    let rule = CronRule::parse(cron, record.timezone.as_deref().unwrap_or("UTC")).ok()?;
    let next = rule.next_after(now_ms.max(due_ms))?;
    match record.end_ms {
        Some(end) if next > end => None,
        _ => Some(next),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(rfc3339: &str) -> u64 {
        DateTime::parse_from_rfc3339(rfc3339)
            .unwrap()
            .timestamp_millis() as u64
    }

    #[test]
    fn nine_in_berlin_follows_daylight_saving_time() {
        let rule = CronRule::parse("0 9 * * *", "Europe/Berlin").unwrap();
        // Winter: 09:00 CET is 08:00 UTC; the clocks go forward on 29 March 2026.
        assert_eq!(
            rule.next_after(ms("2026-03-28T12:00:00Z")),
            Some(ms("2026-03-29T07:00:00Z"))
        );
        assert_eq!(
            rule.next_after(ms("2026-03-27T12:00:00Z")),
            Some(ms("2026-03-28T08:00:00Z"))
        );
        // Weekdays only, six fields (seconds), and strictly after.
        let rule = CronRule::parse("30 0 9 * * MON-FRI", "UTC").unwrap();
        assert_eq!(
            rule.next_after(ms("2026-11-27T09:00:30Z")),
            Some(ms("2026-11-30T09:00:30Z"))
        );
        assert!(CronRule::parse("61 * * * *", "UTC").is_err());
        // A date that never comes: no next time (answered, not searched for ever).
        let never = CronRule::parse("0 0 30 2 *", "UTC");
        assert_eq!(never.ok().and_then(|rule| rule.next_after(0)), None);
        assert!(CronRule::parse("* * * * *", "Mars/Olympus").is_err());
    }
}
