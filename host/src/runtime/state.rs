//! What a wasmtime `Store` holds for one instance: WASI context, limits, and the turn.

use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::ctx::TurnCtx;
use super::outbound::NoOutbound;
use super::output::CappedOutput;

/// Bytes of stdout and of stderr kept per instance.
const OUTPUT_CAP: usize = 64 * 1024;

pub(crate) struct InstanceData {
    wasi: WasiCtx,
    table: ResourceTable,
    http: WasiHttpCtx,
    /// Outbound HTTP without a turn (`describe`): every request is refused.
    no_outbound: NoOutbound,
    pub(super) limiter: MemoryLimiter,
    pub(super) stdout: CappedOutput,
    pub(super) stderr: CappedOutput,
    /// The running turn; `None` while `describe` runs and in a spare.
    pub(super) turn: Option<TurnCtx>,
    /// The message the guest's panic hook reported, if any.
    pub(super) panic: Option<String>,
}

impl InstanceData {
    /// A state with no turn yet (`describe`, a spare instance), whose guest
    /// sees exactly `env` and nothing else of the host: no files, no
    /// sockets, no arguments. A turn attaches itself to `turn` before the
    /// guest runs: its effects and outbound HTTP are then the turn's.
    pub(crate) fn new(
        env: &[(impl AsRef<str>, impl AsRef<str>)],
        memory_bytes: usize,
    ) -> InstanceData {
        let stdout = CappedOutput::new(OUTPUT_CAP);
        let stderr = CappedOutput::new(OUTPUT_CAP);
        let wasi = WasiCtx::builder()
            .envs(env)
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .build();
        InstanceData {
            wasi,
            table: ResourceTable::new(),
            http: WasiHttpCtx::new(),
            no_outbound: NoOutbound,
            limiter: MemoryLimiter {
                max_memory: memory_bytes,
                denied: false,
            },
            stdout,
            stderr,
            turn: None,
            panic: None,
        }
    }
}

/// Puts a store under its limits: the memory limiter, `fuel`, and a
/// wall-clock `deadline` counted from `started` (the guest yields to tokio
/// every epoch tick and is interrupted past the deadline).
pub(crate) fn apply_limits(
    store: &mut Store<InstanceData>,
    fuel: u64,
    deadline: Duration,
    started: Instant,
) -> wasmtime::Result<()> {
    store.limiter(|s| &mut s.limiter);
    // The deadline first: it holds even if setting the fuel fails.
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if started.elapsed() > deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
    store.set_fuel(fuel)
}

impl WasiView for InstanceData {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for InstanceData {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        let hooks: &mut dyn wasmtime_wasi_http::WasiHttpHooks = match &mut self.turn {
            Some(turn) => &mut turn.outbound,
            None => &mut self.no_outbound,
        };
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks,
        }
    }
}

/// Caps each linear memory and remembers whether it refused a growth, so an
/// out-of-memory abort is reported as the memory limit and not as a crash.
pub(crate) struct MemoryLimiter {
    max_memory: usize,
    pub(super) denied: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = desired <= self.max_memory;
        if !allowed {
            self.denied = true;
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}
