//! Deleting sessions: on request (`DELETE /sessions/{id}`, after a running
//! turn was cancelled) and by the retention setting, which purges ended
//! sessions past an age. A deleted session's journal and records are gone,
//! its open streams end, and it is 404 afterwards; an approval it was
//! waiting on is withdrawn in the approvals feed.

use uuid::Uuid;

use super::feed;
use crate::store::StoreError;
use crate::store::batch::{Batch, Op};
use crate::store::records::SessionStatus;

/// Deletes a session that has no running turn (409 while one runs: cancel
/// it first). With `ended_before`, only a session that ended before that
/// RFC 3339 time is deleted (the retention purge; others are 409).
pub(in crate::store) struct DeleteSession {
    pub session: Uuid,
    pub ended_before: Option<String>,
}

impl Op for DeleteSession {
    type Output = ();

    fn session(&self) -> Option<Uuid> {
        Some(self.session)
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<(), StoreError> {
        let id = self.session;
        let record = &batch.session(id)?.record;
        if record.status == SessionStatus::Running {
            return Err(StoreError::Conflict(
                "a turn is running: cancel it, then delete the session".into(),
            ));
        }
        if let Some(before) = &self.ended_before {
            // RFC 3339 UTC timestamps of one format compare as text.
            if record.status != SessionStatus::Ended || record.updated_at >= *before {
                return Err(StoreError::Conflict(format!(
                    "session {id} did not end before {before}"
                )));
            }
        }
        let withdrawn = feed::withdrawn_by_deletion(record);
        let hook = (withdrawn.as_ref()).and_then(|entry| feed::withdrawal_hook(record, entry));
        batch.delete_session(id)?;
        if let Some(hook) = hook {
            batch.changes.hooks.push(hook);
        }
        match withdrawn {
            Some(entry) => batch.feed(&entry),
            None => Ok(()),
        }
    }
}
