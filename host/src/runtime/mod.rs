//! Running agents, in two halves: `compile/` (a component checked and
//! compiled at deploy, a deployment's compiled form loaded for its turns;
//! the engine, the linker, the caches) and `turn/` (turns scheduled,
//! cancelled, drained; each capability's per-deployment and per-turn
//! state). `error.rs` and `limits.rs` are leaves both use; the turn half
//! imports the compile half, never the reverse.
//!
//! Every turn and every resume runs in a fresh instance made from an
//! `InstancePre` cached per deployment (made ahead of the turn when a spare
//! is ready), so nothing a guest does survives into the next turn and no
//! linking happens on the turn's path. Calls are async:
//! a guest yields to tokio every epoch tick and never blocks a worker.

mod compile;
mod error;
pub(crate) mod limits;
mod turn;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;
use wasmtime::Engine;
use wasmtime::component::Linker;
use wasmtime_wasi::WasiCtx;

pub(crate) use crate::redact::Redactor;
pub(crate) use compile::bindings;
pub(crate) use compile::{
    AgentPre, PreopensHook, PrepareError, Prepared, SHARED_CODE_MARKER, apply_limits,
    deployment_dir, describe_for_snapshot, fingerprint, new_build_engine, valid_tool_name,
};
pub(crate) use error::RuntimeError;
pub(crate) use turn::{llm, mcp, outbound};

use compile::{Compiler, InstanceState, Places};
use outbound::OutboundPolicy;
use turn::{Operator, TurnCtx, Turns};

use crate::secrets::Vault;
use crate::store::{Db, SessionRecord, StoreError, TurnSink, WriterHandle};

/// What a wasmtime `Store` holds for one instance of an agent: the compile
/// half's instance state with the turn half's context attached.
pub(crate) type InstanceData = InstanceState<TurnCtx>;

/// A build's store for a snapshot (`cli::lang`): the runtime's own.
pub(crate) type SnapshotStore = wasmtime::Store<InstanceData>;

/// A store for a build's snapshot: `wasi` as the build made it, `preopens`
/// answering the guest's `get-directories`; see `describe_for_snapshot`.
pub(crate) fn snapshot_store(
    engine: &Engine,
    wasi: WasiCtx,
    preopens: PreopensHook,
) -> SnapshotStore {
    compile::snapshot_store(engine, wasi, preopens)
}

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
    /// The soonest an agent's timer may be due after it is set
    /// (`--min-timer-delay`): a sooner one is due then.
    pub min_timer_delay: Duration,
}

/// `--min-timer-delay` by default.
pub(crate) const DEFAULT_MIN_TIMER_DELAY: Duration = Duration::from_secs(1);

impl Default for TurnSettings {
    fn default() -> Self {
        TurnSettings {
            max_concurrent: DEFAULT_MAX_CONCURRENT_TURNS,
            approval_timeout: None,
            max_journal_bytes: None,
            min_timer_delay: DEFAULT_MIN_TIMER_DELAY,
        }
    }
}

/// The runtime: its compile half and its turn half.
pub struct Runtime {
    compile: Arc<Compiler<TurnCtx>>,
    turns: Arc<Turns>,
}

impl Runtime {
    pub fn new(
        data_dir: PathBuf,
        store: Db,
        writer: WriterHandle,
        vault: Arc<Vault>,
        turns: TurnSettings,
        outbound: OutboundPolicy,
        compile_cache: Option<&Path>,
    ) -> anyhow::Result<Arc<Runtime>> {
        let max_concurrent = turns.max_concurrent;
        let slots = u32::try_from(max_concurrent.max(1))
            .unwrap_or(u32::MAX)
            .saturating_add(16)
            .saturating_add(turn::MAX_SPARES as u32);
        let slots_for = format!(
            "{max_concurrent} concurrent turns, 16 for deploys and {} spares",
            turn::MAX_SPARES
        );
        let places = Places {
            data_dir,
            store: store.clone(),
            writer: writer.clone(),
            compile_cache: compile_cache.map(Path::to_path_buf),
        };
        let compile = Arc::new(Compiler::new(places, slots, &slots_for, |linker| {
            bindings::Agent::add_to_linker::<InstanceData, wasmtime::component::HasSelf<InstanceData>>(
                linker,
                |state| state,
            )
        })?);
        let operator = Operator {
            outbound,
            approval_timeout: turns.approval_timeout,
            max_journal_bytes: turns.max_journal_bytes,
            min_timer_delay: turns.min_timer_delay,
        };
        let turns = Turns::new(
            compile.clone(),
            store,
            writer,
            vault,
            max_concurrent,
            operator,
        );
        Ok(Arc::new(Runtime {
            compile,
            turns: Arc::new(turns),
        }))
    }

    // The compile half.

    pub fn engine(&self) -> &Engine {
        self.compile.engine()
    }

    /// The linker deployments are instantiated with (the benches' too).
    pub(crate) fn linker(&self) -> &Linker<InstanceData> {
        self.compile.linker()
    }

    /// Runs every deploy-time check on the component `bytes` (the bundle's
    /// `entry`) and stores it with its artifact in `dir`. Blocking: call
    /// off the async workers.
    pub fn prepare(&self, entry: &str, bytes: &[u8], dir: &Path) -> Result<Prepared, PrepareError> {
        self.compile.prepare(entry, bytes, dir)
    }

    /// Keeps a built component where the other hosts of a shared store can
    /// reach it. Blocking: call off the async workers.
    pub fn share_component(&self, deployment: Uuid, bytes: &[u8]) -> Result<(), RuntimeError> {
        self.compile.share_component(deployment, bytes)
    }

    /// Compiles `deployment` whole in the background when its component
    /// links shared modules; once per deployment and process.
    pub(crate) fn compile_whole_later(&self, deployment: Uuid) {
        (self.compile).compile_whole_later(deployment, self.turns.forget_when_whole(deployment));
    }

    // The turn half.

    /// The operator's outbound settings.
    pub fn outbound_policy(&self) -> &OutboundPolicy {
        self.turns.outbound_policy()
    }

    /// The sink the writer starts committed turns with (`store::start`).
    pub fn turn_sink(&self) -> Arc<dyn TurnSink> {
        self.turns.sink()
    }

    /// Cancels a turn wherever it runs and waits for its ending (`Turns::cancel`).
    pub async fn cancel(
        &self,
        session: Uuid,
        turn: u32,
        by: String,
    ) -> Result<Option<SessionRecord>, StoreError> {
        self.turns.cancel(session, turn, by).await
    }

    /// Another host asked to cancel a turn: cancels it if it runs here.
    pub fn cancel_here(&self, session: Uuid, turn: u32, by: &str) {
        self.turns.cancel_here(session, turn, by);
    }

    /// Turns on this host waiting for a slot now (the API refuses new
    /// turns past `--max-queued-turns` of them).
    pub(crate) fn turns_waiting(&self) -> usize {
        self.turns.waiting()
    }

    /// Stops starting turns (shutdown); running ones go on.
    pub fn stop_accepting(&self) {
        self.turns.stop_accepting();
    }

    /// Waits up to `grace` for running turns to finish; returns how many are left.
    pub async fn drain(&self, grace: Duration) -> usize {
        self.turns.drain(grace).await
    }
}
