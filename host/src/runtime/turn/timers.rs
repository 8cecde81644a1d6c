//! The timer imports of `agenthost:agent/host` (`schedule`,
//! `cancel-schedule`; docs/schedules.md): checked when the agent calls
//! them and held by the turn (`TurnCtx::timers`) until its final commit,
//! which applies them only if the turn ends well (`store::domain::timers`).
//!
//! Bad arguments (neither or both of `after-ms` and `at`, an `at` that is
//! not RFC 3339, an input that is not JSON) break a rule and fail the turn;
//! the caps (per turn, per session: docs/limits.md) refuse with `limit` and
//! the turn goes on.

use std::time::SystemTime;

use uuid::Uuid;

use super::ctx::TurnCtx;
use crate::journal::TurnErrorKind;
use crate::runtime::bindings::HostError;
use crate::store::{
    MAX_SCHEDULES, MAX_TURN_SCHEDULES, ScheduleRecord, now_rfc3339, rfc3339_ms, unix_ms,
};

/// The latest due time a timer may have: the end of year 9999 (RFC 3339's
/// four-digit years), in Unix ms.
const LATEST_MS: u64 = 253_402_300_799_999;

impl TurnCtx {
    pub(super) async fn schedule(
        &mut self,
        after_ms: Option<u64>,
        at: Option<String>,
        input: String,
    ) -> Result<String, HostError> {
        self.open()?;
        let now = unix_ms(SystemTime::now());
        // Never sooner than the operator's minimum (`--min-timer-delay`).
        let soonest = now.saturating_add(self.limits.min_timer_delay.as_millis() as u64);
        let due_ms = match (after_ms, at) {
            (Some(after), None) => now.saturating_add(after),
            (None, Some(at)) => match chrono::DateTime::parse_from_rfc3339(&at) {
                Ok(at) => u64::try_from(at.timestamp_millis()).unwrap_or(0),
                Err(err) => {
                    let message = format!("schedule: `at` {at:?} is not an RFC 3339 time ({err})");
                    return Err(self.fail(TurnErrorKind::InvalidOrder, message));
                }
            },
            _ => {
                let message = "schedule: give `after-ms` or `at`, exactly one".to_string();
                return Err(self.fail(TurnErrorKind::InvalidOrder, message));
            }
        };
        if due_ms > LATEST_MS {
            let message = "schedule: the due time is after the year 9999".to_string();
            return Err(self.fail(TurnErrorKind::InvalidOrder, message));
        }
        let due_ms = due_ms.max(soonest);
        // The input is kept on the session's record, where PostgreSQL cannot hold a NUL.
        if crate::util::json_has_nul(&input) {
            let message = "schedule: the input holds a NUL character (U+0000)".to_string();
            return Err(self.fail(TurnErrorKind::InvalidOrder, message));
        }
        let input = self.parse_json("the schedule's input", &input)?;
        if self.timers.scheduled.len() >= MAX_TURN_SCHEDULES {
            return Err(HostError::Limit(format!(
                "a turn makes at most {MAX_TURN_SCHEDULES} schedules (docs/limits.md)"
            )));
        }
        let held = self.session_schedules().await?;
        let kept = held.iter().filter(|id| !self.timers.cancelled.contains(id));
        if kept.count() + self.timers.scheduled.len() >= MAX_SCHEDULES {
            return Err(HostError::Limit(format!(
                "the session holds {MAX_SCHEDULES} schedules, its limit: cancel one first (docs/limits.md)"
            )));
        }
        let id = Uuid::now_v7();
        self.timers.scheduled.push(ScheduleRecord {
            id,
            at: rfc3339_ms(due_ms),
            due_ms,
            input,
            created_at: now_rfc3339(),
            ..Default::default()
        });
        Ok(id.to_string())
    }

    pub(super) async fn cancel_schedule(&mut self, id: String) -> Result<bool, HostError> {
        self.open()?;
        let Ok(id) = Uuid::parse_str(&id) else {
            return Ok(false);
        };
        if let Some(index) = self.timers.scheduled.iter().position(|s| s.id == id) {
            self.timers.scheduled.remove(index);
            return Ok(true);
        }
        if self.timers.cancelled.contains(&id) {
            return Ok(false);
        }
        if !self.session_schedules().await?.contains(&id) {
            return Ok(false);
        }
        self.timers.cancelled.push(id);
        Ok(true)
    }

    /// The ids of the schedules the session's record holds now.
    async fn session_schedules(&mut self) -> Result<Vec<Uuid>, HostError> {
        let session = self.journal.session;
        let record = (self.journal.store)
            .read(move |s| s.session(session))
            .await
            .map_err(|err| HostError::Unavailable(err.to_string()))?;
        Ok(record
            .map(|r| r.schedules.iter().map(|s| s.id).collect())
            .unwrap_or_default())
    }
}
