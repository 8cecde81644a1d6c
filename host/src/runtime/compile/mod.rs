//! The compile half of the runtime: a component checked and compiled at
//! deploy (`Compiler::prepare`), a deployment's compiled form loaded for its
//! turns (`Compiler::load`), and the engine, linker and caches behind both
//! (`engine.rs` builds the one engine configuration, `bindings.rs` holds the
//! one `bindgen!`). It never names a turn: the instance state is generic
//! over the turn the turn half attaches (`InstanceState<T>`), so the turn
//! half imports this one and never the reverse.

mod artifacts;
pub(crate) mod bindings;
mod compile_cache;
mod engine;
mod instance;
mod limiter;
mod output;
mod prepare;
mod shared_modules;
mod snapshot;
mod split;
mod split_state;
mod whole;

use std::path::PathBuf;
use std::sync::Arc;

use uuid::Uuid;
use wasmtime::Engine;
use wasmtime::component::Linker;

pub(crate) use artifacts::deployment_dir;
pub(crate) use bindings::{Agent, AgentPre};
pub(crate) use engine::{fingerprint, new_build_engine};
pub(crate) use instance::{AttachedTurn, InstanceState, PreopensHook, apply_limits};
pub(crate) use prepare::{PrepareError, Prepared, trap_message, valid_tool_name};
pub(crate) use snapshot::{describe_for_snapshot, snapshot_store};
pub(crate) use split_state::MARKER as SHARED_CODE_MARKER;

use super::RuntimeError;
use compile_cache::CompileCache;
use shared_modules::SharedModules;

use crate::store::{Db, DeploymentRecord, WriterHandle};

/// A deployment's compiled form: its `InstancePre`, ready to instantiate.
pub(crate) struct Compiled<T: 'static> {
    pub pre: AgentPre<InstanceState<T>>,
    /// It links shared modules until its whole compile is recorded
    /// (`whole.rs`): a load kept meanwhile is dropped then.
    pub links_libraries: bool,
}

/// The engine, the linker and the compiled code of this process, for
/// instances whose state holds a turn of type `T`.
pub(crate) struct Compiler<T: 'static> {
    engine: Engine,
    linker: Linker<InstanceState<T>>,
    data_dir: PathBuf,
    store: Db,
    writer: WriterHandle,
    /// The engine's compile cache, for the build log's hit counts.
    compile_cache: Option<Arc<CompileCache>>,
    /// Large core modules compiled once by content (`split.rs`).
    shared_modules: Arc<SharedModules>,
    /// Deployments compiled again whole in the background.
    wholes: Arc<whole::Wholes>,
}

/// Where the compile half keeps its files and records.
pub(crate) struct Places {
    pub data_dir: PathBuf,
    pub store: Db,
    pub writer: WriterHandle,
    /// Cranelift's cache directory (and the shared modules' beside it).
    pub compile_cache: Option<PathBuf>,
}

impl<T: AttachedTurn> Compiler<T> {
    /// The engine for `slots` instances at once (`slots_for` says what they
    /// are for, in the error), its epoch ticker, and the linker: WASI,
    /// outbound HTTP only, and the host's own imports, linked by `link_host`.
    pub(crate) fn new(
        places: Places,
        slots: u32,
        slots_for: &str,
        link_host: impl FnOnce(&mut Linker<InstanceState<T>>) -> wasmtime::Result<()>,
    ) -> anyhow::Result<Compiler<T>> {
        let wasm = |e: wasmtime::Error| anyhow::anyhow!("{e:#}");
        let Places {
            data_dir,
            store,
            writer,
            compile_cache,
        } = places;
        let cache = match &compile_cache {
            Some(dir) => Some(Arc::new(CompileCache::open(dir).map_err(|e| {
                anyhow::anyhow!("cannot open the compile cache {}: {e}", dir.display())
            })?)),
            None => None,
        };
        let engine = engine::new_engine_with(slots, cache.clone()).map_err(|e| {
            anyhow::anyhow!(
                "cannot set up the instance pool for {slots} instances \
                 ({slots_for}): {e:#}. \
                 The pool reserves several GiB of address space per instance up front \
                 (none of it is memory until a guest touches it): lift the process's \
                 address-space limit (`ulimit -v`) or lower --max-concurrent-turns"
            )
        })?;
        engine::start_epoch_ticker(&engine)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(wasm)?;
        // Outbound HTTP only; `wasi:sockets` is linked but every address is refused.
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(wasm)?;
        link_host(&mut linker).map_err(wasm)?;
        let modules_dir = match &compile_cache {
            Some(dir) => dir.join("modules"),
            None => data_dir.join("modules"),
        };
        let shared_modules = Arc::new(SharedModules::new(&modules_dir, &engine));
        Ok(Compiler {
            engine,
            linker,
            data_dir,
            store,
            writer,
            compile_cache: cache,
            shared_modules,
            wholes: Arc::default(),
        })
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The linker every deployment's `InstancePre` is made with.
    pub(crate) fn linker(&self) -> &Linker<InstanceState<T>> {
        &self.linker
    }

    /// A deployment's compiled form: its precompiled artifact, or its
    /// component compiled again when the engine changed (the new artifact
    /// recorded), fetched from the shared store when this host never had
    /// it. One that links shared modules is compiled whole in the
    /// background; `on_whole` runs once that is recorded (its caller's
    /// cached load is stale then).
    pub(crate) async fn load(
        &self,
        record: DeploymentRecord,
        on_whole: impl FnOnce() + Send + 'static,
    ) -> Result<Compiled<T>, RuntimeError> {
        let deployment = record.id;
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
            self.compile_whole_later(deployment, on_whole);
        }
        let pre = linker
            .instantiate_pre(&loaded.component)
            .and_then(AgentPre::new)
            .map_err(|e| RuntimeError::Load(format!("{e:#}")))?;
        Ok(Compiled {
            pre,
            links_libraries,
        })
    }

    /// Keeps a built component where the other hosts of a shared store can
    /// reach it. Blocking: call off the async workers.
    pub(crate) fn share_component(
        &self,
        deployment: Uuid,
        bytes: &[u8],
    ) -> Result<(), RuntimeError> {
        Ok(self.store.put_component(deployment, bytes)?)
    }
}
