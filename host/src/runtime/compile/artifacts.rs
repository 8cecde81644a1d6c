//! Compiled components on disk: the original component and its precompiled
//! artifact, hash-checked before deserializing and recompiled when the engine changed.

use std::path::{Path, PathBuf};

use crate::util::{sha256_hex, write_atomic};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::RuntimeError;
use super::engine::fingerprint;
use super::shared_modules::SharedModules;
use crate::store::{Artifact, DeploymentRecord, StoreError};

const COMPONENT_FILE: &str = "component.wasm";
const ARTIFACT_FILE: &str = "component.cwasm";

/// Where a deployment's files live.
pub(crate) fn deployment_dir(data_dir: &Path, id: uuid::Uuid) -> PathBuf {
    data_dir.join("deployments").join(id.to_string())
}

/// Stores a component and its precompiled artifact; returns their hashes.
pub(super) fn store(
    engine: &Engine,
    dir: &Path,
    component: &[u8],
    artifact: &[u8],
) -> Result<Artifact, RuntimeError> {
    std::fs::create_dir_all(dir).map_err(RuntimeError::io("create the deployment dir"))?;
    write_atomic(&dir.join(COMPONENT_FILE), component)
        .map_err(RuntimeError::io("write the component"))?;
    write_atomic(&dir.join(ARTIFACT_FILE), artifact)
        .map_err(RuntimeError::io("write the artifact"))?;
    // Both names, and the deployment's own directory in its parent, survive a power cut.
    crate::util::sync_dir(dir).map_err(RuntimeError::io("sync the deployment dir"))?;
    if let Some(parent) = dir.parent() {
        crate::util::sync_dir(parent).map_err(RuntimeError::io("sync the deployments dir"))?;
    }
    Ok(Artifact {
        component_sha256: sha256_hex(component),
        artifact_sha256: sha256_hex(artifact),
        engine: fingerprint(engine),
    })
}

/// A loaded component, and the new artifact record when it had to be recompiled.
pub(super) struct Loaded {
    pub component: Component,
    pub recompiled: Option<Artifact>,
}

/// Loads a deployment's component: the precompiled artifact when its hash and
/// engine match, otherwise a fresh compilation of the (hash-checked)
/// original, which `shared` brings from the store when this host never had
/// it (another host built the deployment).
pub(super) fn load(
    engine: &Engine,
    modules: &SharedModules,
    data_dir: &Path,
    record: &DeploymentRecord,
    shared: &dyn Fn() -> Result<Option<Vec<u8>>, StoreError>,
) -> Result<Loaded, RuntimeError> {
    let artifact = record
        .artifact
        .as_ref()
        .ok_or(RuntimeError::NotBuilt(record.id))?;
    let dir = deployment_dir(data_dir, record.id);
    if artifact.engine == fingerprint(engine) {
        // A missing or damaged artifact is rebuilt from the kept component.
        let bytes = std::fs::read(dir.join(ARTIFACT_FILE)).unwrap_or_default();
        if sha256_hex(&bytes) == artifact.artifact_sha256 {
            // SAFETY: the bytes were produced by `Engine::precompile_component`
            // of an engine with the same fingerprint, and their hash matches the
            // one recorded when they were written.
            let component = unsafe { Component::deserialize(engine, &bytes) }
                .map_err(|e| RuntimeError::Load(format!("{e:#}")))?;
            return Ok(Loaded {
                component,
                recompiled: None,
            });
        }
        tracing::warn!(deployment = %record.id, "artifact missing or damaged; recompiling from the component");
    }
    let original = original(data_dir, record, shared)?;
    let (compiled, _) = modules
        .compile(engine, &original)
        .map_err(|e| RuntimeError::Load(format!("{e:#}")))?;
    let new = store(engine, &dir, &original, &compiled)?;
    // SAFETY: just produced by this engine.
    let component = unsafe { Component::deserialize(engine, &compiled) }
        .map_err(|e| RuntimeError::Load(format!("{e:#}")))?;
    Ok(Loaded {
        component,
        recompiled: Some(new),
    })
}

/// A deployment's component as deployed: the kept file, else the store's
/// copy; checked against the recorded hash.
pub(super) fn original(
    data_dir: &Path,
    record: &DeploymentRecord,
    shared: &dyn Fn() -> Result<Option<Vec<u8>>, StoreError>,
) -> Result<Vec<u8>, RuntimeError> {
    let artifact = record
        .artifact
        .as_ref()
        .ok_or(RuntimeError::NotBuilt(record.id))?;
    let path = deployment_dir(data_dir, record.id).join(COMPONENT_FILE);
    let original = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => match shared()? {
            Some(bytes) => bytes,
            None => return Err(RuntimeError::io("read the component")(err)),
        },
        Err(err) => return Err(RuntimeError::io("read the component")(err)),
    };
    if sha256_hex(&original) != artifact.component_sha256 {
        return Err(RuntimeError::Load(format!(
            "the stored component of deployment {} does not match its hash",
            record.id
        )));
    }
    Ok(original)
}
