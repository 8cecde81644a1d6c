//! The cap on one session's journal in bytes (`--max-session-journal-mb`,
//! docs/limits.md): the bytes of its events' JSON payloads, counted in the
//! session's record as batches write them (a running turn's own events at
//! its end). At the cap, an input (new, queued or scheduled) is refused
//! with 409 `journal_full`; a running turn whose events would pass it ends
//! with TURN_ERROR `output_limit` (the runtime checks it against the room
//! its ticket names, `TurnTicket::journal_bytes`).

use uuid::Uuid;

use crate::store::Cap;
use crate::store::StoreError;
use crate::store::batch::Batch;

/// Whether session `id`'s journal is at the cap: it takes no more input
/// (a schedule of it is dropped, as on an ended session).
pub(super) fn full(batch: &mut Batch<'_>, id: Uuid) -> Result<bool, StoreError> {
    let Some(cap) = batch.state.quotas.journal_bytes else {
        return Ok(false);
    };
    Ok(batch.session(id)?.record.journal_bytes >= cap)
}

/// Refuses an input to session `id` once its journal is at the cap.
pub(super) fn check(batch: &mut Batch<'_>, id: Uuid) -> Result<(), StoreError> {
    let Some(cap) = batch.state.quotas.journal_bytes else {
        return Ok(());
    };
    let bytes = batch.session(id)?.record.journal_bytes;
    if bytes < cap {
        return Ok(());
    }
    Err(StoreError::Quota {
        cap: Cap::JournalBytes,
        message: format!(
            "the session's journal holds {} MiB, its cap (--max-session-journal-mb {}): it takes no more input; start a new session",
            bytes >> 20,
            cap >> 20
        ),
    })
}
