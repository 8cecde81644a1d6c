//! The turn half of the runtime: its face is `Turns::schedule` (through
//! the writer's `TurnSink`), `Turns::cancel` and `Turns::drain`. A turn
//! waits for a slot (`parked.rs` while it waits), runs in a fresh instance
//! of its deployment (`run.rs`, `spare.rs`), and reaches the journal only
//! through its context (`ctx.rs`, `calls.rs`) and the host imports
//! (`host.rs`, `timers.rs`). Each capability has one small type that makes
//! its per-deployment state once (`deployed.rs`) and its per-turn state at
//! the turn's start: approval gates (`gates.rs`), limits
//! (`runtime::limits`), secrets and redaction (`secrets.rs`), outbound HTTP
//! (`outbound/`), timers (`timers.rs`) and MCP servers (`mcp/`; its imports:
//! `mcp_calls.rs`). Outbound
//! and MCP live here, beside the turn, because every request they make is
//! the turn's: asked of its gate, journaled through its outbox.

mod calls;
mod control;
pub(super) mod ctx;
mod deployed;
mod gate;
mod gates;
mod host;
pub(crate) mod llm;
mod llm_calls;
pub(crate) mod mcp;
mod mcp_calls;
pub(crate) mod outbound;
mod parked;
mod run;
mod secrets;
mod spare;
mod timers;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Semaphore;
use uuid::Uuid;

pub(crate) use ctx::TurnCtx;
pub(crate) use deployed::Operator;
pub(crate) use spare::MAX_SPARES;

use super::compile::Compiler;
use control::{Controls, Registered};
use deployed::Deployments;
use gate::cancelled;
use outbound::OutboundPolicy;

use crate::journal::{EventType, TurnErrorKind};
use crate::secrets::Vault;
use crate::store::{
    Committed, Db, SessionRecord, SessionStatus, StoreError, TurnSink, TurnTicket, WriterHandle,
};

/// How long `cancel` waits for the cancelled turn's ending to be committed.
pub(crate) const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// The turns of this host: scheduled, waiting for a slot, running.
pub(crate) struct Turns {
    compile: Arc<Compiler<TurnCtx>>,
    store: Db,
    writer: WriterHandle,
    /// Secret values, read at each turn's start.
    vault: Arc<Vault>,
    /// The deployments loaded, and the operator's settings.
    deployments: Deployments,
    /// Fresh instances made ahead of their turns.
    spares: Arc<spare::Spares>,
    /// Slots, counts, cancels, and whether new turns start.
    running: Running,
}

/// Where this host's turns stand.
struct Running {
    slots: Arc<Semaphore>,
    /// Turns scheduled and not yet finished.
    active: Arc<AtomicUsize>,
    /// Turns waiting for a slot (`turns_waiting`).
    waiting: Arc<AtomicUsize>,
    /// The turns this host runs, for cancels.
    controls: Arc<Controls>,
    /// False once shutdown began: no new turn starts.
    accepting: AtomicBool,
}

/// The turns as the writer's `TurnSink`.
struct Starts {
    turns: Weak<Turns>,
    handle: tokio::runtime::Handle,
}

impl TurnSink for Starts {
    fn start(&self, ticket: TurnTicket, committed: Option<Committed>) {
        let Some(turns) = self.turns.upgrade() else {
            // The server is gone: the turn stays accepted in the journal
            // and runs at the next start (store::domain::recovery).
            return;
        };
        // The writer's thread calls this outside the async runtime.
        let _entered = self.handle.enter();
        turns.schedule(ticket, committed);
    }
}

/// Counts a scheduled turn until it ends (or its task is dropped).
struct Active(Arc<AtomicUsize>);

impl Active {
    fn new(count: &Arc<AtomicUsize>) -> Active {
        count.fetch_add(1, Ordering::Relaxed);
        crate::metrics::get().turns_running.inc();
        Active(count.clone())
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
        crate::metrics::get().turns_running.dec();
    }
}

/// Counts a turn waiting for its slot until it has it (or is cancelled).
struct Waiting(Arc<AtomicUsize>);

impl Waiting {
    fn new(count: &Arc<AtomicUsize>) -> Waiting {
        count.fetch_add(1, Ordering::Relaxed);
        Waiting(count.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Turns {
    pub(crate) fn new(
        compile: Arc<Compiler<TurnCtx>>,
        store: Db,
        writer: WriterHandle,
        vault: Arc<Vault>,
        max_concurrent: usize,
        operator: Operator,
    ) -> Turns {
        Turns {
            compile,
            store,
            writer,
            vault,
            deployments: Deployments::new(operator),
            spares: Arc::default(),
            running: Running {
                slots: Arc::new(Semaphore::new(max_concurrent.max(1))),
                active: Arc::default(),
                waiting: Arc::default(),
                controls: Arc::default(),
                accepting: AtomicBool::new(true),
            },
        }
    }

    /// The operator's outbound settings.
    pub(crate) fn outbound_policy(&self) -> &OutboundPolicy {
        &self.deployments.operator.outbound
    }

    /// The sink the writer starts committed turns with (`store::start`):
    /// the one way a turn starts. It holds the turns weakly (the runtime
    /// holds the writer).
    pub(crate) fn sink(self: &Arc<Self>) -> Arc<dyn TurnSink> {
        Arc::new(Starts {
            turns: Arc::downgrade(self),
            handle: tokio::runtime::Handle::current(),
        })
    }

    /// What to run once `deployment` is compiled whole (its cached load is
    /// stale then).
    pub(crate) fn forget_when_whole(&self, deployment: Uuid) -> impl FnOnce() + Send + 'static {
        self.deployments.forget_when_whole(deployment)
    }

    /// Schedules a turn: it runs as soon as a slot is free. When its
    /// command may not be committed yet, it reads nothing before
    /// `committed` resolves.
    fn schedule(self: &Arc<Self>, ticket: TurnTicket, committed: Option<Committed>) {
        let running = &self.running;
        if !running.accepting.load(Ordering::Relaxed) {
            // Shutting down: the turn stays accepted in the journal and runs
            // at the next start (see store::sessions::recover).
            tracing::info!(session = %ticket.session_id, "not starting a turn during shutdown");
            return;
        }
        let turns = self.clone();
        let active = Active::new(&running.active);
        // From now until the turn's end this host owns it (on PostgreSQL,
        // its lease is renewed while it waits for a slot and while it runs).
        let hold = self.store.hold_turn(ticket.session_id);
        let registered = running.controls.register(ticket.session_id, ticket.turn);
        // Counted from now, so the request that started it sees it.
        let waiting = Waiting::new(&running.waiting);
        // The supervisor: a runner that dies without its final commit (a
        // panic in host code) must not leave the session running forever.
        tokio::spawn(async move {
            let _active = active;
            let _hold = hold;
            let (session, turn) = (ticket.session_id, ticket.turn);
            let runner =
                tokio::spawn((turns.clone()).run_when_free(ticket, registered, committed, waiting));
            if let Err(err) = runner.await
                && err.is_panic()
            {
                tracing::error!(%session, turn, "a turn's runner panicked; closing the turn");
                let message =
                    "the host failed while running this turn; send a new input to continue";
                turns
                    .close_turn(session, turn, TurnErrorKind::Internal, message.into())
                    .await;
            }
        });
    }

    /// Runs the turn once a slot is free, unless it is cancelled first. A
    /// turn that has to wait leaves its input to the journal meanwhile
    /// (`parked`), so waiting turns hold no inputs.
    async fn run_when_free(
        self: Arc<Self>,
        ticket: TurnTicket,
        registered: Registered,
        committed: Option<Committed>,
        waiting: Waiting,
    ) {
        let gate = registered.gate.clone();
        let (session, turn) = (ticket.session_id, ticket.turn);
        let slots = &self.running.slots;
        let (ticket, _slot) = match slots.clone().try_acquire_owned() {
            Ok(slot) => (ticket, slot),
            Err(_) => {
                let parked = parked::Parked::park(ticket);
                let slot = tokio::select! {
                    slot = slots.clone().acquire_owned() => slot,
                    by = gate.cancelled() => {
                        self.close_turn(session, turn, TurnErrorKind::Cancelled, cancelled(&by)).await;
                        return;
                    }
                };
                let Ok(slot) = slot else {
                    return;
                };
                match parked.unpark(&self.store, committed.as_ref()).await {
                    Ok(ticket) => (ticket, slot),
                    Err(err) => {
                        tracing::error!(%session, turn, error = %err, "cannot read a waiting turn's input");
                        let message = "the host could not read this turn's input from its journal; send a new input to continue";
                        self.close_turn(session, turn, TurnErrorKind::Storage, message.into())
                            .await;
                        return;
                    }
                }
            }
        };
        drop(waiting);
        self.run_turn(ticket, gate, committed).await;
        drop(registered);
    }

    /// Closes a turn no runner will close (see `WriterHandle::close_turn`).
    async fn close_turn(&self, session: Uuid, turn: u32, kind: TurnErrorKind, message: String) {
        match self.writer.close_turn(session, turn, kind, message).await {
            // A conflict: the turn ended meanwhile, with its own ending.
            Ok(()) | Err(StoreError::Conflict(_)) => {}
            Err(err) => {
                tracing::error!(%session, turn, error = %err, "cannot close the turn")
            }
        }
    }

    /// Cancels `turn` of `session` wherever it runs, then waits up to
    /// `CANCEL_WAIT` for the turn's ending to be committed: the session as
    /// it is then, or `None` if the turn still runs (its host has not
    /// answered yet). `by` names who cancelled, for the TURN_ERROR.
    pub(crate) async fn cancel(
        &self,
        session: Uuid,
        turn: u32,
        by: String,
    ) -> Result<Option<SessionRecord>, StoreError> {
        if !self.running.controls.cancel(session, turn, &by) {
            if self.store.shared() {
                // Whichever host runs it hears this (its own listener included).
                self.store
                    .read(move |s| s.announce_cancel(session, turn, &by))
                    .await?;
            } else {
                // One host: no runner here means none anywhere.
                self.close_turn(session, turn, TurnErrorKind::Cancelled, cancelled(&by))
                    .await;
            }
        }
        // The turn's ending reaches the hub like any commit (from another
        // host too: a watched session's events are brought by the listener);
        // subscribed before the first read, so none falls in between.
        let mut commits = self.store.hub().subscribe(session);
        let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
        loop {
            let record = self.store.read(move |s| s.session(session)).await?;
            match record {
                Some(r) if r.status == SessionStatus::Running && r.turn == turn => {}
                other => return Ok(other),
            }
            // Read the record again once a turn's last event is committed
            // (or the channel lagged or closed: anything may have happened).
            loop {
                let Ok(received) = tokio::time::timeout_at(deadline, commits.rx.recv()).await
                else {
                    return Ok(None);
                };
                let ending = received.as_ref().map_or(true, |event| {
                    matches!(
                        event.kind(),
                        Some(
                            EventType::TurnEnded
                                | EventType::TurnError
                                | EventType::ToolApprovalRequired
                                | EventType::SessionEnded
                        )
                    )
                });
                if ending {
                    break;
                }
            }
        }
    }

    /// Another host asked to cancel a turn: cancels it if it runs here.
    pub(crate) fn cancel_here(&self, session: Uuid, turn: u32, by: &str) {
        self.running.controls.cancel(session, turn, by);
    }

    /// Turns on this host waiting for a slot now.
    pub(crate) fn waiting(&self) -> usize {
        self.running.waiting.load(Ordering::Relaxed)
    }

    /// Stops starting turns (shutdown); running ones go on.
    pub(crate) fn stop_accepting(&self) {
        self.running.accepting.store(false, Ordering::Relaxed);
    }

    /// Waits up to `grace` for running turns to finish; returns how many are left.
    pub(crate) async fn drain(&self, grace: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let left = self.running.active.load(Ordering::Relaxed);
            if left == 0 || tokio::time::Instant::now() >= deadline {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
