//! The turns a commit starts: `TurnTicket` (what a command declares in its
//! output when it journals a TURN_STARTED), the `TurnSink` the writer hands
//! each committed ticket to (the runtime), and `Committed`, what a turn
//! started before its commit waits for before it reads.
//!
//! **A committed TURN_STARTED runs exactly once, on the host that holds its
//! lease.** This is the one place that makes it so, on both engines: a
//! command that journals a TURN_STARTED (a session's creation, an input, a
//! decision, the recovery of a turn that left no trace) declares the turn's
//! ticket in its output (`Op::tickets`), and the writer, the owner that
//! records the turn, starts it: once per ticket, on this host, whose boot id
//! the command wrote as the session's owner (on PostgreSQL, `hold_turn`
//! keeps its lease from then on). Nobody else starts a turn; a command
//! rejected, a batch that failed, or an idempotent retry starts none.
//!
//! When: on an engine that commits exactly what it applied, in one attempt
//! (redb), the writer starts the batch's turns as soon as it is applied,
//! while the commit's fsync runs: the guest's first steps overlap the commit
//! instead of following it. Nothing becomes visible earlier, because
//! everything a turn does that others can see goes through the writer after
//! that batch: its events, outbound requests (journaled before they leave),
//! its end. What the turn reads (its history, earlier tool calls) waits for
//! `Committed`; if the batch fails, the store stops writes and the turn's
//! first write fails (docs/durability.md, "A turn that starts before its
//! commit"). An engine that may apply a batch more than once (PostgreSQL
//! retries a transaction that lost a race) starts a batch's turns once it
//! committed, before it answers.
//!
//! The sink is given once, when the runtime exists (`WriterHandle::
//! start_turns`); tickets committed before that (the recovery at start, a
//! deadline's decision) wait for it.

use std::sync::{Arc, Mutex, MutexGuard};

use futures::FutureExt;
use futures::future::Shared;
use serde_json::Value;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::StoreError;
use super::records::{DecisionDetails, PendingApproval};

/// Why a turn runs.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnReason {
    Input,
    /// A decision on the gated call that suspended the previous turn.
    ApprovalDecision {
        approved: bool,
        approver: String,
        /// The call as it runs (with the human's edited arguments, if any).
        pending: Box<PendingApproval>,
        /// What the decision added (docs/approvals.md, "Richer decisions").
        details: Box<DecisionDetails>,
    },
}

/// Everything needed to run a turn whose TURN_STARTED is journaled.
#[derive(Debug, Clone)]
pub struct TurnTicket {
    pub session_id: Uuid,
    pub turn: u32,
    pub deployment_id: Uuid,
    pub app_slug: String,
    pub route: String,
    pub input: Value,
    pub reason: TurnReason,
    /// The seq of the turn's TURN_STARTED, which holds `input`: a turn that
    /// waits for a slot drops its input and reads it back from there
    /// (`runtime::turn::parked`).
    pub started_seq: u64,
    /// The session's journal bytes when the turn started (its start
    /// events included): the turn may add up to `--max-session-journal-mb`
    /// less this (`domain::journal_cap`).
    pub journal_bytes: u64,
}

/// Resolves once the events it was handed out for are committed (or failed).
pub(super) type AppendAck = Shared<oneshot::Receiver<Result<(), StoreError>>>;

/// A new `AppendAck`, and where the writer sends the commit's result to it.
pub(super) fn append_ack() -> (oneshot::Sender<Result<(), StoreError>>, AppendAck) {
    let (reply, ack) = oneshot::channel();
    (reply, ack.shared())
}

/// Resolves once the batch that started a turn is committed (or failed).
#[derive(Clone)]
pub struct Committed(pub(super) AppendAck);

impl Committed {
    /// Waits for the batch's commit.
    pub async fn wait(&self) -> Result<(), StoreError> {
        self.0.clone().await.map_err(|_| StoreError::WriterGone)?
    }
}

/// Where the writer starts the turns it committed: the runtime.
pub trait TurnSink: Send + Sync + 'static {
    /// Starts `ticket`'s turn. `committed` is `Some` when the batch that
    /// journaled its TURN_STARTED may not be committed yet: the turn reads
    /// nothing before it resolves. Called on the writer's thread, outside
    /// the async runtime: it must not block.
    fn start(&self, ticket: TurnTicket, committed: Option<Committed>);
}

/// The writer's way to its sink, shared with its handles (which set it).
pub(super) struct SinkSlot(Mutex<Slot>);

enum Slot {
    /// No sink yet: committed tickets wait here (a host's writer). Only the
    /// start-up's own commands commit before the sink is given (the API
    /// listens after it): the turns recovered and the approvals a deadline
    /// denied meanwhile, no more than the store already holds.
    Waiting(Vec<(TurnTicket, Option<Committed>)>),
    /// No sink yet, and none expected (a writer that runs no turns, as in
    /// tests and benches): tickets are left to the commands' callers.
    Ignoring,
    Sink(Arc<dyn TurnSink>),
}

impl SinkSlot {
    /// Tickets wait for the sink.
    pub(super) fn waiting() -> Arc<Self> {
        Arc::new(SinkSlot(Mutex::new(Slot::Waiting(Vec::new()))))
    }

    /// Tickets are dropped until a sink is set.
    pub(super) fn ignoring() -> Arc<Self> {
        Arc::new(SinkSlot(Mutex::new(Slot::Ignoring)))
    }

    /// Starts each of `tickets` (or keeps them for the sink).
    pub(super) fn start(&self, tickets: Vec<TurnTicket>, committed: Option<&Committed>) {
        if tickets.is_empty() {
            return;
        }
        let sink = match &mut *self.lock() {
            Slot::Sink(sink) => sink.clone(),
            Slot::Ignoring => return,
            Slot::Waiting(queued) => {
                queued.extend(tickets.into_iter().map(|t| (t, committed.cloned())));
                return;
            }
        };
        for ticket in tickets {
            sink.start(ticket, committed.cloned());
        }
    }

    /// Sets the sink (once: a later call replaces it) and starts the tickets
    /// that waited for it.
    pub(super) fn set(&self, sink: Arc<dyn TurnSink>) {
        let before = std::mem::replace(&mut *self.lock(), Slot::Sink(sink.clone()));
        if let Slot::Waiting(queued) = before {
            for (ticket, committed) in queued {
                sink.start(ticket, committed);
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        // Nothing panics while holding the lock; a poisoned one holds valid data.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
