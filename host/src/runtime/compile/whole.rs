//! Compiling a deployment whole, in the background. A build links the
//! component's libraries from `shared_modules`, so a redeploy is ready in a
//! fraction of a second; but wasmtime resolves an imported module's
//! imports and exports by name at every instantiation (about 1 ms more per
//! turn for CPython's: BENCHMARKS.md). So each deployment that links shared
//! modules is compiled again whole, one at a time, its artifact replaced
//! and its cached `InstancePre` dropped (the caller's `on_whole`): the
//! turns after that load the whole one.
//!
//! The compiles run on a rayon pool of one thread of their own: wasmtime
//! compiles a module's functions on the pool it is called from, so a whole
//! compile takes one core and never queues ahead of a deploy's own compile
//! (on rayon's global pool) or takes every core from the turns.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Instant;

use uuid::Uuid;
use wasmtime::Engine;

use super::{Compiler, artifacts, split};
use crate::runtime::RuntimeError;
use crate::store::{Artifact, Db};

/// The deployments compiled whole (or being compiled) by this process.
#[derive(Default)]
pub(super) struct Wholes {
    started: Mutex<HashSet<Uuid>>,
    /// One thread: the compiles run one at a time, each on one core.
    pool: OnceLock<Option<rayon::ThreadPool>>,
}

impl Wholes {
    fn pool(&self) -> Option<&rayon::ThreadPool> {
        self.pool
            .get_or_init(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .thread_name(|_| "compile-whole".into())
                    .build()
                    .map_err(|err| {
                        tracing::warn!(
                            error = %err,
                            "cannot start the whole compiles' thread; deployments keep linking"
                        );
                    })
                    .ok()
            })
            .as_ref()
    }
}

impl<T> Compiler<T> {
    /// Compiles `deployment` whole in the background when its component
    /// links shared modules; once per deployment and process. Returns at
    /// once; `on_whole` runs once the whole artifact is recorded.
    pub(crate) fn compile_whole_later(
        &self,
        deployment: Uuid,
        on_whole: impl FnOnce() + Send + 'static,
    ) {
        let first = self
            .wholes
            .started
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(deployment);
        if !first {
            return;
        }
        let engine = self.engine.clone();
        let data_dir = self.data_dir.clone();
        let store = self.store.clone();
        let writer = self.writer.clone();
        let Some(pool) = self.wholes.pool() else {
            return;
        };
        pool.spawn(move || {
            let started = Instant::now();
            let artifact = match compile(&engine, &data_dir, &store, deployment) {
                Ok(Some(artifact)) => artifact,
                Ok(None) => return,
                Err(err) => {
                    tracing::warn!(
                        %deployment,
                        error = %err,
                        "cannot compile the deployment whole; it keeps linking its libraries"
                    );
                    return;
                }
            };
            if let Err(err) = writer.blocking_set_artifact(deployment, artifact) {
                tracing::warn!(%deployment, error = %err, "cannot record the whole artifact");
                return;
            }
            on_whole();
            tracing::info!(
                %deployment,
                duration_ms = started.elapsed().as_secs_f64() * 1000.0,
                "compiled whole"
            );
        });
    }
}

/// The deployment's component compiled whole and stored, or `None` when
/// there is nothing to gain (it links no library) or it is gone.
fn compile(
    engine: &Engine,
    data_dir: &Path,
    store: &Db,
    deployment: Uuid,
) -> Result<Option<Artifact>, RuntimeError> {
    let Some(record) = store.deployment(deployment)? else {
        return Ok(None);
    };
    if record.artifact.is_none() {
        return Ok(None);
    }
    let original = artifacts::original(data_dir, &record, &|| store.component(deployment))?;
    if !matches!(split::split(&original), Ok(Some(_))) {
        return Ok(None);
    }
    let compiled = engine
        .precompile_component(&original)
        .map_err(|e| RuntimeError::Load(format!("{e:#}")))?;
    let dir = artifacts::deployment_dir(data_dir, deployment);
    artifacts::store(engine, &dir, &original, &compiled).map(Some)
}
