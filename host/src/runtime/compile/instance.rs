//! What a wasmtime `Store` holds for one instance: WASI context, limits,
//! captured output, and whatever turn is attached (`InstanceState<T>`: the
//! compile half never names the turn; `runtime::InstanceData` is the state
//! with a `TurnCtx`).

use std::time::{Duration, Instant};

use wasmtime::component::{Resource, ResourceTable};
use wasmtime::{Store, UpdateDeadline};
use wasmtime_wasi::filesystem::{WasiFilesystemCtxView, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::preopens;
use wasmtime_wasi::p2::bindings::filesystem::types::Descriptor;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{
    RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

pub(crate) use super::limiter::MemoryLimiter;
use super::output::CappedOutput;

/// Bytes of stdout and of stderr kept per instance.
const OUTPUT_CAP: usize = 64 * 1024;

/// What a turn attached to an instance gives it: its outbound HTTP.
pub(crate) trait AttachedTurn: Send + 'static {
    /// The `wasi:http` hooks of the turn's requests.
    fn http_hooks(&mut self) -> &mut dyn WasiHttpHooks;
}

pub(crate) struct InstanceState<T> {
    wasi: WasiCtx,
    table: ResourceTable,
    http: WasiHttpCtx,
    /// Outbound HTTP without a turn (`describe`): every request is refused.
    no_outbound: NoOutbound,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stdout: CappedOutput,
    pub(crate) stderr: CappedOutput,
    /// The running turn; `None` while `describe` runs and in a spare.
    pub(crate) turn: Option<T>,
    /// The message the guest's panic hook reported, if any.
    pub(crate) panic: Option<String>,
    /// Who answers `wasi:filesystem/preopens` in a linker that asks this
    /// state (`preopens::Host` below); `None` in every instance of a turn.
    preopens: Option<PreopensHook>,
}

/// Answers a guest's `get-directories` from the WASI context's own
/// preopens, or none, as its owner decides: a Python build's snapshot
/// shows the project to its loader only (`cli::lang::python_snapshot`),
/// in a store of this type so that the WASI host functions are compiled
/// once for the runtime and the build.
pub(crate) type PreopensHook = Box<
    dyn FnMut(WasiFilesystemCtxView<'_>) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>>
        + Send,
>;

impl<T> InstanceState<T> {
    /// A state with no turn yet (`describe`, a spare instance), whose guest
    /// sees exactly `env` and nothing else of the host: no files, no
    /// sockets, no arguments. A turn attaches itself to `turn` before the
    /// guest runs: its effects and outbound HTTP are then the turn's.
    pub(crate) fn new(
        env: &[(impl AsRef<str>, impl AsRef<str>)],
        memory_bytes: usize,
    ) -> InstanceState<T> {
        let stdout = CappedOutput::new(OUTPUT_CAP);
        let stderr = CappedOutput::new(OUTPUT_CAP);
        let wasi = WasiCtx::builder()
            .envs(env)
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .build();
        InstanceState::with(wasi, stdout, stderr, memory_bytes, None)
    }

    /// A state for a build's snapshot: `wasi` as its owner made it (its
    /// output and preopens), and `preopens` answering the guest's
    /// `get-directories` in a linker that links `preopens::Host` for this
    /// type. No turn, no limits but those the owner arms; the guest's output
    /// goes where `wasi` sends it, so the captured outputs stay empty.
    pub(crate) fn for_build(wasi: WasiCtx, preopens: PreopensHook) -> InstanceState<T> {
        let (stdout, stderr) = (CappedOutput::new(0), CappedOutput::new(0));
        InstanceState::with(wasi, stdout, stderr, usize::MAX, Some(preopens))
    }

    /// The state around a WASI context: what `new` and `for_build` share.
    fn with(
        wasi: WasiCtx,
        stdout: CappedOutput,
        stderr: CappedOutput,
        memory_bytes: usize,
        preopens: Option<PreopensHook>,
    ) -> InstanceState<T> {
        InstanceState {
            wasi,
            table: ResourceTable::new(),
            http: WasiHttpCtx::new(),
            no_outbound: NoOutbound,
            limiter: MemoryLimiter::new(memory_bytes),
            stdout,
            stderr,
            turn: None,
            panic: None,
            preopens,
        }
    }
}

impl<T: Send + 'static> preopens::Host for InstanceState<T> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        let Some(mut hook) = self.preopens.take() else {
            return preopens::Host::get_directories(&mut self.filesystem());
        };
        let directories = hook(self.filesystem());
        self.preopens = Some(hook);
        directories
    }
}

/// Puts a store under its limits: the memory limiter, `fuel`, and a
/// wall-clock `deadline` counted from `started` (the guest yields to tokio
/// every epoch tick and is interrupted past the deadline).
pub(crate) fn apply_limits<T: Send + 'static>(
    store: &mut Store<InstanceState<T>>,
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

impl<T: Send + 'static> WasiView for InstanceState<T> {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl<T: AttachedTurn> WasiHttpView for InstanceState<T> {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        let hooks: &mut dyn wasmtime_wasi_http::WasiHttpHooks = match &mut self.turn {
            Some(turn) => turn.http_hooks(),
            None => &mut self.no_outbound,
        };
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks,
        }
    }
}

/// The `wasi:http` hooks of an instance with no outbound access at all
/// (`describe`, a build's snapshot): every request is refused.
#[derive(Default)]
pub(crate) struct NoOutbound;

type Sent = Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ),
    wasmtime_wasi_http::Error,
>;

impl WasiHttpHooks for NoOutbound {
    fn send_request(
        &mut self,
        _request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) })
    }
}
