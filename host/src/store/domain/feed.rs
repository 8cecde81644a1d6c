//! The approvals feed's rules (`GET /approvals/events`): an entry when a
//! gated call starts waiting, when it is decided (a timeout included) and
//! when it is withdrawn (its session ended or was deleted), each carrying
//! the journal event behind it. The session commands call these where a
//! pending approval begins or ends; the batch appends the entries last, so
//! the feed's order is the commit order on every engine.

use serde_json::Value;
use uuid::Uuid;

use crate::store::StoreError;
use crate::store::batch::{Batch, Hook, Op};
use crate::store::error::corrupt;
use crate::store::records::{
    ApprovalFeedEntry, FeedKind, SessionRecord, SessionStatus, WithdrawReason,
};

/// The call at `seq` of `session` (its TOOL_APPROVAL_REQUIRED) waits for a decision.
pub(super) fn requested(
    batch: &mut Batch<'_>,
    session: Uuid,
    tool_call_id: &str,
    seq: u64,
) -> Result<(), StoreError> {
    announce(batch, session, FeedKind::Requested, tool_call_id, seq)
}

/// The pending call was decided; `seq` is its TOOL_APPROVAL_GRANTED or _DENIED.
pub(super) fn decided(
    batch: &mut Batch<'_>,
    session: Uuid,
    tool_call_id: &str,
    seq: u64,
) -> Result<(), StoreError> {
    announce(batch, session, FeedKind::Decided, tool_call_id, seq)
}

/// An entry of `kind` carrying the journal event at `seq`.
fn announce(
    batch: &mut Batch<'_>,
    session: Uuid,
    kind: FeedKind,
    tool_call_id: &str,
    seq: u64,
) -> Result<(), StoreError> {
    let event = event_json(batch, session, seq)?;
    entry(batch, session, kind, tool_call_id, event, None)
}

/// The pending call will never be decided; `seq` is the SESSION_ENDED
/// that withdrew it (none when the session is being deleted).
pub(super) fn withdrawn(
    batch: &mut Batch<'_>,
    session: Uuid,
    tool_call_id: &str,
    reason: WithdrawReason,
    seq: Option<u64>,
) -> Result<(), StoreError> {
    let event = match seq {
        Some(seq) => event_json(batch, session, seq)?,
        None => None,
    };
    let kind = FeedKind::Withdrawn;
    entry(batch, session, kind, tool_call_id, event, Some(reason))
}

/// The withdrawal of the approval a session about to be deleted waits on,
/// if it waits on one (queued by the caller once the deletion is done, so
/// the deletion does not take it away with the session's other entries).
pub(super) fn withdrawn_by_deletion(record: &SessionRecord) -> Option<ApprovalFeedEntry> {
    let pending = record.pending_approval.as_ref()?;
    (record.status == SessionStatus::AwaitingApproval).then(|| {
        let call = &pending.call.tool_call_id;
        let reason = Some(WithdrawReason::SessionDeleted);
        entry_of(record, FeedKind::Withdrawn, call, None, reason)
    })
}

fn entry(
    batch: &mut Batch<'_>,
    session: Uuid,
    kind: FeedKind,
    tool_call_id: &str,
    event: Option<Value>,
    reason: Option<WithdrawReason>,
) -> Result<(), StoreError> {
    let record = &batch.session(session)?.record;
    let entry = entry_of(record, kind, tool_call_id, event, reason);
    if let Some(hook) = withdrawal_hook(record, &entry) {
        batch.changes.hooks.push(hook);
    }
    batch.feed(&entry)
}

/// The `approval.withdrawn` webhook event of a withdrawal entry about
/// `record`'s session (its pending call still on the record); none for
/// other entries.
pub(super) fn withdrawal_hook(record: &SessionRecord, entry: &ApprovalFeedEntry) -> Option<Hook> {
    if entry.kind != FeedKind::Withdrawn {
        return None;
    }
    let data = super::webhooks::withdrawn_data(record, entry);
    Some(Hook::Announce {
        kind: "approval.withdrawn",
        app: record.app_id,
        data: Box::new(data),
    })
}

/// An entry about `record`'s session.
fn entry_of(
    record: &SessionRecord,
    kind: FeedKind,
    tool_call_id: &str,
    event: Option<Value>,
    reason: Option<WithdrawReason>,
) -> ApprovalFeedEntry {
    ApprovalFeedEntry {
        kind,
        session_id: record.id,
        app_id: record.app_id,
        app: record.app_slug.clone(),
        tool_call_id: tool_call_id.to_string(),
        event,
        reason,
        end_user: record.end_user.clone(),
    }
}

/// The client-facing JSON of an event of `session`: written by this batch,
/// or else by an earlier one in the session's last turn.
fn event_json(batch: &mut Batch<'_>, session: Uuid, seq: u64) -> Result<Option<Value>, StoreError> {
    let json = match batch.written(session, seq) {
        Some(event) => Some(event.json.clone()),
        None => (batch.tx.last_turn_events(session)?.into_iter())
            .find(|event| event.seq == seq)
            .map(|event| event.json),
    };
    json.map(|json| serde_json::from_str(&json).map_err(corrupt))
        .transpose()
}

/// Forgets up to `limit` feed entries appended before `before_ms` (Unix ms).
pub(in crate::store) struct PurgeFeed {
    pub before_ms: u64,
    pub limit: usize,
}

impl Op for PurgeFeed {
    type Output = usize;

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<usize, StoreError> {
        batch.tx.purge_feed(self.before_ms, self.limit)
    }
}
