//! Timers: inputs the session gets later, as turns of their own
//! (`Turn::schedule_after`, `Turn::schedule_at`, `Turn::cancel_schedule`;
//! docs/schedules.md).

use std::time::Duration;

use serde_json::Value;

use crate::bindings::agenthost::agent::host;
use crate::error::{Error, host};
use crate::turn::Turn;

impl Turn {
    /// Schedules `input` as a later turn of this session, `after` from now,
    /// and returns the schedule's id.
    ///
    /// It takes effect only if this turn ends well: the host journals it
    /// (TURN_SCHEDULED) in the turn's final commit, so a turn that fails
    /// schedules nothing. At its time the session gets a turn with `input`
    /// (its TURN_STARTED says reason `schedule`; to the agent it is an
    /// input like any other), queued if the session is busy. A turn makes
    /// at most 10 schedules and a session holds at most 100
    /// ([`HostError::Limit`](crate::HostError::Limit) beyond).
    pub fn schedule_after(&self, after: Duration, input: &Value) -> Result<String, Error> {
        let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        host(host::schedule(Some(after_ms), None, &input.to_string()))
    }

    /// Like [`Turn::schedule_after`], at the time `at` (RFC 3339 with a UTC
    /// offset, e.g. `2026-12-01T09:00:00+01:00`); a time already past fires
    /// as soon as this turn has ended.
    pub fn schedule_at(&self, at: &str, input: &Value) -> Result<String, Error> {
        host(host::schedule(None, Some(at), &input.to_string()))
    }

    /// Cancels a schedule of this session that has not fired (made by this
    /// turn, an earlier one, or through the API). Returns whether one was
    /// pending. A cancel too is kept only if this turn ends well.
    pub fn cancel_schedule(&self, id: &str) -> Result<bool, Error> {
        host(host::cancel_schedule(id))
    }
}
