//! Running agents: the engine, the linker, compiled deployments, and turns.
//!
//! Every turn and every resume runs in a fresh instance made from an
//! `InstancePre` cached per deployment (made ahead of the turn when a spare
//! is ready), so nothing a guest does survives into the next turn and no
//! linking happens on the turn's path. Calls are async:
//! a guest yields to tokio every epoch tick and never blocks a worker.

mod artifacts;
pub(crate) mod bindings;
mod compile_cache;
mod control;
mod ctx;
mod engine;
mod error;
mod gate;
mod gates;
mod host;
pub(crate) mod limiter;
pub(crate) mod limits;
pub(crate) mod mcp;
pub(crate) mod outbound;
mod output;
mod parked;
mod prepare;
mod shared_modules;
mod spare;
mod split;
mod split_state;
pub(crate) mod state;
mod timers;
mod turn;
mod whole;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Semaphore;
use uuid::Uuid;
use wasmtime::Engine;
use wasmtime::component::Linker;

pub(crate) use crate::redact::Redactor;
pub(crate) use artifacts::deployment_dir;
pub(crate) use engine::{fingerprint, new_build_engine};
pub(crate) use error::RuntimeError;
pub(crate) use prepare::{PrepareError, Prepared, valid_tool_name};
pub(crate) use split_state::MARKER as SHARED_CODE_MARKER;

use bindings::AgentPre;
use compile_cache::CompileCache;
use control::{Controls, Registered};
use gates::Gates;
use limits::TurnLimits;
use outbound::{OriginPattern, OutboundPolicy};
use shared_modules::SharedModules;
use state::InstanceData;

use crate::journal::TurnErrorKind;
use crate::secrets::Vault;
use crate::store::{
    Committed, Db, SessionRecord, SessionStatus, StoreError, TurnSink, TurnTicket, WriterHandle,
};

/// Turns running at once by default; the rest wait for a slot.
pub(crate) const DEFAULT_MAX_CONCURRENT_TURNS: usize = 256;

/// The operator's settings for turns (`serve` flags).
#[derive(Debug, Clone, Copy)]
pub struct TurnSettings {
    /// Turns running at once; the rest wait for a slot.
    pub max_concurrent: usize,
    /// How long an approval may wait when the deployment's manifest does
    /// not say (`limits.approval_timeout_secs`); `None`: forever.
    pub approval_timeout: Option<Duration>,
    /// Bytes of one session's journal (`--max-session-journal-mb`); `None`: no cap.
    pub max_journal_bytes: Option<u64>,
}

impl Default for TurnSettings {
    fn default() -> Self {
        TurnSettings {
            max_concurrent: DEFAULT_MAX_CONCURRENT_TURNS,
            approval_timeout: None,
            max_journal_bytes: None,
        }
    }
}

/// How long `cancel` waits for the cancelled turn's ending to be committed.
pub(crate) const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// A deployment ready to run turns.
#[derive(Clone)]
struct Deployed {
    pre: AgentPre<InstanceData>,
    gates: Arc<Gates>,
    /// The secrets the manifest declares.
    secrets: Arc<[String]>,
    limits: TurnLimits,
    /// The effective outbound allowlist.
    outbound: Arc<[OriginPattern]>,
    /// The manifest's `[mcp.<name>]` servers.
    mcp: Arc<[mcp::McpServer]>,
}

/// The runtime as the writer's `TurnSink`.
struct Starts {
    runtime: std::sync::Weak<Runtime>,
    handle: tokio::runtime::Handle,
}

impl TurnSink for Starts {
    fn start(&self, ticket: TurnTicket, committed: Option<Committed>) {
        let Some(runtime) = self.runtime.upgrade() else {
            // The server is gone: the turn stays accepted in the journal
            // and runs at the next start (store::domain::recovery).
            return;
        };
        // The writer's thread calls this outside the async runtime.
        let _entered = self.handle.enter();
        runtime.schedule(ticket, committed);
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

pub struct Runtime {
    engine: Engine,
    pub(crate) linker: Linker<InstanceData>,
    data_dir: PathBuf,
    store: Db,
    writer: WriterHandle,
    deployments: Arc<Mutex<whole::Loaded<Deployed>>>,
    slots: Arc<Semaphore>,
    vault: Arc<Vault>,
    /// Turns scheduled and not yet finished.
    active: Arc<AtomicUsize>,
    /// Turns waiting for a slot (`turns_waiting`).
    waiting: Arc<AtomicUsize>,
    /// The turns this host runs, for cancels.
    controls: Arc<Controls>,
    /// The operator's default for `TurnLimits::approval_timeout`.
    approval_timeout: Option<Duration>,
    /// The operator's cap on a session's journal (`TurnLimits::in_journal`).
    max_journal_bytes: Option<u64>,
    /// False once shutdown began: no new turn starts.
    accepting: AtomicBool,
    outbound: OutboundPolicy,
    /// The engine's compile cache, for the build log's hit counts.
    compile_cache: Option<Arc<CompileCache>>,
    /// Fresh instances made ahead of their turns.
    spares: Arc<spare::Spares>,
    /// Large core modules compiled once by content (`runtime::split`).
    shared_modules: Arc<SharedModules>,
    /// Deployments compiled again whole in the background.
    wholes: Arc<whole::Wholes>,
}

impl Runtime {
    pub fn new(
        data_dir: PathBuf,
        store: Db,
        writer: WriterHandle,
        vault: Arc<Vault>,
        turns: TurnSettings,
        outbound: OutboundPolicy,
        compile_cache: Option<&std::path::Path>,
    ) -> anyhow::Result<Arc<Runtime>> {
        let wasm = |e: wasmtime::Error| anyhow::anyhow!("{e:#}");
        let max_concurrent_turns = turns.max_concurrent;
        let slots = u32::try_from(max_concurrent_turns.max(1))
            .unwrap_or(u32::MAX)
            .saturating_add(16)
            .saturating_add(spare::MAX_SPARES as u32);
        let cache = match compile_cache {
            Some(dir) => Some(Arc::new(CompileCache::open(dir).map_err(|e| {
                anyhow::anyhow!("cannot open the compile cache {}: {e}", dir.display())
            })?)),
            None => None,
        };
        let engine = engine::new_engine_with(slots, cache.clone()).map_err(|e| {
            anyhow::anyhow!(
                "cannot set up the instance pool for {slots} instances \
                 ({max_concurrent_turns} concurrent turns, 16 for deploys and {} spares): {e:#}. \
                 The pool reserves several GiB of address space per instance up front \
                 (none of it is memory until a guest touches it): lift the process's \
                 address-space limit (`ulimit -v`) or lower --max-concurrent-turns",
                spare::MAX_SPARES
            )
        })?;
        engine::start_epoch_ticker(&engine)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(wasm)?;
        // Outbound HTTP only; `wasi:sockets` is linked but every address is refused.
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(wasm)?;
        bindings::Agent::add_to_linker::<InstanceData, wasmtime::component::HasSelf<InstanceData>>(
            &mut linker,
            |state| state,
        )
        .map_err(wasm)?;
        let modules_dir = match compile_cache {
            Some(dir) => dir.join("modules"),
            None => data_dir.join("modules"),
        };
        let shared_modules = Arc::new(SharedModules::new(&modules_dir, &engine));
        Ok(Arc::new(Runtime {
            shared_modules,
            engine,
            linker,
            data_dir,
            store,
            writer,
            deployments: Arc::default(),
            wholes: Arc::default(),
            slots: Arc::new(Semaphore::new(max_concurrent_turns.max(1))),
            vault,
            active: Arc::default(),
            waiting: Arc::default(),
            controls: Arc::default(),
            approval_timeout: turns.approval_timeout,
            max_journal_bytes: turns.max_journal_bytes,
            accepting: AtomicBool::new(true),
            outbound,
            compile_cache: cache,
            spares: Arc::default(),
        }))
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The operator's outbound settings.
    pub fn outbound_policy(&self) -> &OutboundPolicy {
        &self.outbound
    }

    /// The sink the writer starts committed turns with (`store::start`):
    /// the one way a turn starts. It holds the runtime weakly (the runtime
    /// holds the writer).
    pub fn turn_sink(self: &Arc<Self>) -> Arc<dyn TurnSink> {
        Arc::new(Starts {
            runtime: Arc::downgrade(self),
            handle: tokio::runtime::Handle::current(),
        })
    }

    /// Schedules a turn: it runs as soon as a slot is free. When its
    /// command may not be committed yet, it reads nothing before
    /// `committed` resolves.
    fn schedule(self: &Arc<Self>, ticket: TurnTicket, committed: Option<Committed>) {
        if !self.accepting.load(Ordering::Relaxed) {
            // Shutting down: the turn stays accepted in the journal and runs
            // at the next start (see store::sessions::recover).
            tracing::info!(session = %ticket.session_id, "not starting a turn during shutdown");
            return;
        }
        let runtime = self.clone();
        let active = Active::new(&self.active);
        // From now until the turn's end this host owns it (on PostgreSQL,
        // its lease is renewed while it waits for a slot and while it runs).
        let hold = self.store.hold_turn(ticket.session_id);
        let registered = self.controls.register(ticket.session_id, ticket.turn);
        // Counted from now, so the request that started it sees it.
        let waiting = Waiting::new(&self.waiting);
        // The supervisor: a runner that dies without its final commit (a
        // panic in host code) must not leave the session running forever.
        tokio::spawn(async move {
            let _active = active;
            let _hold = hold;
            let (session, turn) = (ticket.session_id, ticket.turn);
            let runner = tokio::spawn(
                (runtime.clone()).run_when_free(ticket, registered, committed, waiting),
            );
            if let Err(err) = runner.await
                && err.is_panic()
            {
                tracing::error!(%session, turn, "a turn's runner panicked; closing the turn");
                let message =
                    "the host failed while running this turn; send a new input to continue";
                runtime
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
        let (ticket, _slot) = match self.slots.clone().try_acquire_owned() {
            Ok(slot) => (ticket, slot),
            Err(_) => {
                let parked = parked::Parked::park(ticket);
                let slot = tokio::select! {
                    slot = self.slots.clone().acquire_owned() => slot,
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
    pub async fn cancel(
        &self,
        session: Uuid,
        turn: u32,
        by: String,
    ) -> Result<Option<SessionRecord>, StoreError> {
        if !self.controls.cancel(session, turn, &by) {
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
                        event.event_type(),
                        "TURN_ENDED" | "TURN_ERROR" | "TOOL_APPROVAL_REQUIRED" | "SESSION_ENDED"
                    )
                });
                if ending {
                    break;
                }
            }
        }
    }

    /// Another host asked to cancel a turn: cancels it if it runs here.
    pub fn cancel_here(&self, session: Uuid, turn: u32, by: &str) {
        self.controls.cancel(session, turn, by);
    }

    /// Turns on this host waiting for a slot now (the API refuses new
    /// turns past `--max-queued-turns` of them).
    pub(crate) fn turns_waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Stops starting turns (shutdown); running ones go on.
    pub fn stop_accepting(&self) {
        self.accepting.store(false, Ordering::Relaxed);
    }

    /// Waits up to `grace` for running turns to finish; returns how many are left.
    pub async fn drain(&self, grace: std::time::Duration) -> usize {
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let left = self.active.load(Ordering::Relaxed);
            if left == 0 || tokio::time::Instant::now() >= deadline {
                return left;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The deployment's `InstancePre` and gates, loaded (and cached) on first use.
    async fn deployed(&self, deployment: Uuid) -> Result<Deployed, RuntimeError> {
        if let Some(deployed) = self.cached(deployment) {
            return Ok(deployed);
        }
        let record = self
            .store
            .read(move |s| s.deployment(deployment))
            .await?
            .ok_or(RuntimeError::UnknownDeployment(deployment))?;
        let gates = Arc::new(Gates::from_record(&record));
        let secrets: Arc<[String]> = record.secrets.clone().into();
        let mut limits = TurnLimits::from_record(&record.limits);
        limits.approval_timeout = limits.approval_timeout.or(self.approval_timeout);
        let outbound = self.outbound.effective(&record.outbound).into();
        let mcp = mcp::servers_of(&record.manifest);
        let engine = self.engine.clone();
        let data_dir = self.data_dir.clone();
        let store = self.store.clone();
        let modules = self.shared_modules.clone();
        let base = self.linker.clone();
        let (loaded, (linker, links_libraries)) = tokio::task::spawn_blocking(move || {
            let shared = || store.component(deployment);
            let loaded = artifacts::load(&engine, &modules, &data_dir, &record, &shared)?;
            let original = || artifacts::original(&data_dir, &record, &shared);
            let linker = modules.linker(&engine, &base, &loaded.component, &original)?;
            Ok::<_, RuntimeError>((loaded, linker))
        })
        .await
        .map_err(|e| RuntimeError::Load(e.to_string()))??;
        if let Some(artifact) = loaded.recompiled {
            self.writer.set_artifact(deployment, artifact).await?;
        }
        if links_libraries {
            self.compile_whole_later(deployment);
        }
        let pre = linker
            .instantiate_pre(&loaded.component)
            .and_then(AgentPre::new)
            .map_err(|e| RuntimeError::Load(format!("{e:#}")))?;
        let deployed = Deployed {
            pre,
            gates,
            secrets,
            limits,
            outbound,
            mcp,
        };
        self.deployments
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keep(deployment, deployed.clone(), links_libraries);
        Ok(deployed)
    }

    /// Keeps a built component where the other hosts of a shared store can
    /// reach it. Blocking: call off the async workers.
    pub fn share_component(&self, deployment: Uuid, bytes: &[u8]) -> Result<(), RuntimeError> {
        Ok(self.store.put_component(deployment, bytes)?)
    }

    fn cached(&self, deployment: Uuid) -> Option<Deployed> {
        self.deployments
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(deployment)
    }
}

/// The TURN_ERROR message of a cancelled turn.
fn cancelled(by: &str) -> String {
    format!("the turn was cancelled by {by}")
}
