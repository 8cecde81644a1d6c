//! Compiling a deployment whole, in the background. A build links the
//! component's libraries from `shared_modules`, so a redeploy is ready in a
//! fraction of a second; but wasmtime resolves an imported module's
//! imports and exports by name at every instantiation (about 1 ms more per
//! turn for CPython's: BENCHMARKS.md). So each deployment that links shared
//! modules is compiled again whole, one at a time, its artifact replaced
//! and its cached `InstancePre` dropped: the turns after that load the
//! whole one.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use uuid::Uuid;
use wasmtime::Engine;

use super::{Runtime, RuntimeError, artifacts, split};
use crate::store::{Artifact, Db};

/// The deployments compiled whole (or being compiled) by this process.
#[derive(Default)]
pub(super) struct Wholes {
    started: Mutex<HashSet<Uuid>>,
    /// Held by the compile running: one at a time, so a burst of deploys
    /// does not take every core from the turns.
    one_at_a_time: Mutex<()>,
}

impl Runtime {
    /// Compiles `deployment` whole in the background when its component
    /// links shared modules; once per deployment and process. Returns at once.
    pub(crate) fn compile_whole_later(&self, deployment: Uuid) {
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
        let deployments = self.deployments.clone();
        let wholes = self.wholes.clone();
        let spawned = std::thread::Builder::new()
            .name("compile-whole".into())
            .spawn(move || {
                let _one = wholes
                    .one_at_a_time
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let started = Instant::now();
                let artifact = match compile(&engine, &data_dir, &store, deployment) {
                    Ok(Some(artifact)) => artifact,
                    Ok(None) => return,
                    Err(err) => {
                        tracing::warn!(%deployment, error = %err, "cannot compile the deployment whole; it keeps linking its libraries");
                        return;
                    }
                };
                if let Err(err) = writer.blocking_set_artifact(deployment, artifact) {
                    tracing::warn!(%deployment, error = %err, "cannot record the whole artifact");
                    return;
                }
                deployments
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&deployment);
                tracing::info!(
                    %deployment,
                    duration_ms = started.elapsed().as_secs_f64() * 1000.0,
                    "compiled whole"
                );
            });
        if let Err(err) = spawned {
            tracing::warn!(%deployment, error = %err, "cannot start the whole compile");
        }
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
