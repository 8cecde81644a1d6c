//! What a writer command is and sees: the `Op` trait every domain command
//! implements, and one write transaction's worth of commands as the domain
//! sees it: the engine's transaction, the batch's view of every session it
//! touched, the events it wrote (published after the commit), the turns it
//! starts, and what the writer must remember about turns whose writes
//! failed. A leaf below the domain: nothing here knows a command.

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use super::engine::{EventRow, FeedRow, SessionRow, WriteTx};
use super::error::corrupt;
use super::records::{ApprovalFeedEntry, DeploymentRecord, SessionStatus};
use super::start::TurnTicket;
use super::{CurrentRedactor, StoreError, now_rfc3339};
use crate::journal::{EventType, NewEvent, StoredEvent, encode_record};
use crate::store::Missing;

/// One writer command: its inputs and its rule, applied inside a batch.
///
/// `apply` may run more than once for one command (an engine retries a
/// transaction that lost a race), each time from the state the transaction
/// sees: it must not consume its inputs.
pub(super) trait Op: Send + 'static {
    type Output: Send + 'static;
    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<Self::Output, StoreError>;
    /// The turns `output` started (each journaled its TURN_STARTED): the
    /// writer starts them once they are committed (`start.rs`).
    fn tickets(_output: &Self::Output) -> Vec<TurnTicket> {
        Vec::new()
    }
    /// The command's batch failed before the command was applied.
    fn abandon(&mut self) {}
    /// The session the command decides on, when it is known before it is
    /// applied: the engine locks a batch's sessions together, in one order.
    fn session(&self) -> Option<Uuid> {
        None
    }
}

/// The operator's caps, each per app; `None` is no cap (checked by
/// `domain::quotas`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quotas {
    /// Sessions not ended (`--max-open-sessions-per-app`).
    pub open_sessions: Option<u64>,
    /// Sessions running a turn, a turn waiting for a slot included
    /// (`--max-running-turns-per-app`).
    pub running_turns: Option<u64>,
    /// Pending webhook deliveries per endpoint (`--webhook-max-pending`;
    /// `None`: `domain::webhooks::MAX_PENDING`).
    pub webhook_pending: Option<u64>,
    /// Sessions not ended, when an invocation key or an end user opens one
    /// (`--invocation-max-open-sessions-per-app`).
    pub public_open_sessions: Option<u64>,
    /// Running turns, when an invocation key or an end user starts one
    /// (`--invocation-max-running-turns-per-app`).
    pub public_running_turns: Option<u64>,
    /// Bytes of one session's journal (`--max-session-journal-mb`,
    /// `domain::journal_cap`).
    pub journal_bytes: Option<u64>,
    /// The percent of the two frontend caps above one end user, or one
    /// source address of a bare invocation key, may hold
    /// (`--invocation-share-per-principal`; `domain::quotas::share`);
    /// `None`: no share, each may fill the caps.
    pub share_percent: Option<u64>,
}

/// What the writer keeps between batches for the domain's sake.
pub(super) struct WriterState {
    /// The host this writer belongs to (its boot id): the owner it records
    /// on the turns its commands start, and recovers turns for.
    pub(super) boot: Uuid,
    /// Whether a turn's events are refused unless its session is owned by
    /// `boot` (a host that lost the lease can no longer append). Off in
    /// tests that play several hosts at once.
    pub(super) fenced: bool,
    /// Takes secret values out of message texts the writer rebuilds from
    /// deltas when it closes a turn itself (`domain::recovery`).
    pub(super) redact: Option<CurrentRedactor>,
    /// Sessions whose running turn lost a write: its next write becomes TURN_ERROR.
    pub(super) broken: HashSet<Uuid>,
    /// The per-app caps the session commands check (`domain::quotas`).
    pub(super) quotas: Quotas,
}

impl WriterState {
    /// The state of a writer of no particular host: a fresh boot id, no fencing.
    pub(super) fn unfenced() -> Self {
        WriterState {
            boot: Uuid::now_v7(),
            fenced: false,
            redact: None,
            broken: HashSet::new(),
            quotas: Quotas::default(),
        }
    }
}

pub(super) struct Batch<'a> {
    pub(super) tx: &'a mut dyn WriteTx,
    pub(super) state: &'a WriterState,
    /// The `created_at` of every event of the batch: when the writer took it.
    created_at: String,
    pub(super) changes: Changes,
}

/// What a batch's commands changed; all that is left of the batch once
/// they are applied.
#[derive(Default)]
pub(super) struct Changes {
    /// The batch's view of every session it touched (handed to the engine by `finish`).
    pub(super) sessions: HashMap<Uuid, SessionRow>,
    /// Sessions whose record must be saved before the commit.
    pub(super) dirty: HashSet<Uuid>,
    /// Events to publish once committed, in commit order.
    pub(super) published: Vec<(Uuid, StoredEvent)>,
    /// Sessions whose committed state, when the batch first touched them, was a running turn.
    pub(super) running_before: HashSet<Uuid>,
    /// The committed status of every session the batch loaded (not of those it created).
    pub(super) loaded: HashMap<Uuid, SessionStatus>,
    /// Broken turns the batch closed: no longer broken, whatever the commit does.
    pub(super) unbroken: HashSet<Uuid>,
    /// Sessions the batch deleted: their streams end once it committed.
    pub(super) deleted: Vec<Uuid>,
    /// Entries for the approvals feed, appended last (`finish`).
    pub(super) feed: Vec<FeedRow>,
    /// The feed's newest seq once the batch appended to it.
    pub(super) feed_head: Option<u64>,
    /// The turns the batch's commands started, in commit order (`start.rs`).
    pub(super) tickets: Vec<TurnTicket>,
    /// What the batch did that webhooks may announce (`domain::webhooks`),
    /// turned into deliveries in the same transaction.
    pub(super) hooks: Vec<Hook>,
    pub(super) failed: Option<StoreError>,
}

/// Something a webhook may announce, noted as the batch does it.
#[derive(Debug, Clone)]
pub(super) enum Hook {
    /// An event of `session` at `seq` of a type webhooks announce.
    Event { session: Uuid, seq: u64 },
    /// A build ended (the deployment as it now stands).
    Deployment(Box<DeploymentRecord>),
    /// An event made by the domain without a journal event of its own
    /// (`approval.withdrawn`): its type, app and `data`, ready.
    Announce {
        kind: &'static str,
        app: Uuid,
        data: Box<serde_json::Value>,
    },
}

impl<'a> Batch<'a> {
    pub(super) fn new(tx: &'a mut dyn WriteTx, state: &'a WriterState) -> Self {
        Batch {
            tx,
            state,
            created_at: now_rfc3339(),
            changes: Changes::default(),
        }
    }

    pub(super) fn failed(&self) -> bool {
        self.changes.failed.is_some()
    }

    pub(super) fn fail(&mut self, err: StoreError) {
        self.changes.failed.get_or_insert(err);
    }

    /// The session as the batch sees it (committed state plus the batch's changes).
    pub(super) fn session(&mut self, id: Uuid) -> Result<&mut SessionRow, StoreError> {
        if !self.changes.sessions.contains_key(&id) {
            let row = (self.tx.load_session(id)?)
                .ok_or_else(|| StoreError::not_found(Missing::Session, id))?;
            if row.record.status == SessionStatus::Running {
                self.changes.running_before.insert(id);
            }
            self.changes.loaded.insert(id, row.record.status);
            self.changes.sessions.insert(id, row);
        }
        (self.changes.sessions)
            .get_mut(&id)
            .ok_or_else(|| StoreError::not_found(Missing::Session, id))
    }

    /// A session the batch creates.
    pub(super) fn insert_session(&mut self, row: SessionRow) {
        let id = row.record.id;
        self.changes.sessions.insert(id, row);
        self.changes.dirty.insert(id);
    }

    /// The session's record changed: save it with the batch.
    pub(super) fn touch(&mut self, id: Uuid) {
        self.changes.dirty.insert(id);
    }

    /// Deletes a session and forgets what the batch knew of it.
    pub(super) fn delete_session(&mut self, id: Uuid) -> Result<(), StoreError> {
        self.tx.delete_session(id)?;
        self.changes.sessions.remove(&id);
        self.changes.dirty.remove(&id);
        self.changes.loaded.remove(&id);
        self.changes.published.retain(|(session, _)| *session != id);
        self.changes.feed.retain(|row| row.session != id);
        (self.changes.hooks)
            .retain(|hook| !matches!(hook, Hook::Event { session, .. } if *session == id));
        self.changes.deleted.push(id);
        Ok(())
    }

    pub(super) fn is_broken(&self, id: Uuid) -> bool {
        self.state.broken.contains(&id) && !self.changes.unbroken.contains(&id)
    }

    /// Journals `events` as the next events of `session` (which the batch
    /// must have loaded or created).
    pub(super) fn write_events(
        &mut self,
        session: Uuid,
        events: &[NewEvent],
    ) -> Result<(), StoreError> {
        let mut next_seq = self.session(session)?.next_seq;
        let published = &mut self.changes.published;
        published.reserve(events.len());
        for event in events {
            let seq = next_seq;
            let id = self.tx.event_id(seq);
            let (record, json) = encode_record(id, seq, session, event, &self.created_at);
            self.tx.insert_event(EventRow {
                session,
                seq,
                id,
                event_type: event.event_type.as_str(),
                record: &record,
            })?;
            next_seq += 1;
            published.push((session, StoredEvent { id, seq, json }));
            if matches!(
                event.event_type,
                EventType::ToolApprovalRequired
                    | EventType::ToolApprovalGranted
                    | EventType::ToolApprovalDenied
                    | EventType::TurnEnded
                    | EventType::TurnError
                    | EventType::SessionEnded
                    | EventType::BudgetReached
            ) {
                self.changes.hooks.push(Hook::Event { session, seq });
            }
        }
        let row = self.session(session)?;
        row.next_seq = next_seq;
        row.record.journal_bytes += crate::store::payload_bytes(events);
        Ok(())
    }

    /// `write_events` for a running turn's own events: counted in the
    /// session's `journal_bytes` at the turn's end (`FinishTurn`), so an
    /// append does not save the session's record.
    pub(super) fn append_events(
        &mut self,
        session: Uuid,
        events: &[NewEvent],
    ) -> Result<(), StoreError> {
        let before = self.session(session)?.record.journal_bytes;
        self.write_events(session, events)?;
        self.session(session)?.record.journal_bytes = before;
        Ok(())
    }

    /// An event this batch journaled, by its session and seq.
    pub(super) fn written(&self, session: Uuid, seq: u64) -> Option<&StoredEvent> {
        (self.changes.published.iter().rev())
            .find(|(s, event)| *s == session && event.seq == seq)
            .map(|(_, event)| event)
    }

    /// Queues an entry for the approvals feed (appended at `finish`).
    pub(super) fn feed(&mut self, entry: &ApprovalFeedEntry) -> Result<(), StoreError> {
        let json = serde_json::to_string(entry).map_err(corrupt)?;
        self.changes.feed.push(FeedRow {
            session: entry.session_id,
            app: entry.app_id,
            json,
        });
        Ok(())
    }

    /// Saves the sessions the batch changed, appends its feed entries (the
    /// feed's counter is the last thing a transaction takes), and hands back
    /// what the writer needs after the commit.
    pub(super) fn finish(mut self) -> Changes {
        let sessions = std::mem::take(&mut self.changes.sessions);
        if self.changes.failed.is_none()
            && let Err(err) = self.tx.save_sessions(sessions, &self.changes.dirty)
        {
            self.changes.failed = Some(err);
        }
        if self.changes.failed.is_none() && !self.changes.feed.is_empty() {
            match self.tx.append_feed(&self.changes.feed) {
                Ok(head) => self.changes.feed_head = Some(head),
                Err(err) => self.changes.failed = Some(err),
            }
        }
        self.changes
    }
}
