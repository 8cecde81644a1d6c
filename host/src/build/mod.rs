//! Deployments are built off-request, one at a time, on a dedicated thread.
//!
//! A build unpacks the uploaded bundle safely, finds `agent.entry`, runs the
//! runtime's checks (component, compiles, imports, exports, describe), keeps
//! the component and its artifact, and reports `active` or `failed` through
//! the writer. Each failure has its own message, stored truncated in `error`.

pub mod manifest;
pub mod unpack;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;

use uuid::Uuid;

use crate::runtime::{Runtime, deployment_dir};
use crate::store::{BuildOutcome, DeploymentRecord, Store, StoreError, WriterHandle};
use unpack::UnpackLimits;

/// Bytes of a failed build's message kept in `error`.
const MAX_ERROR_BYTES: usize = 8 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{0}")]
    Bundle(String),
    #[error("the entry `{0}` named by agent.entry is missing from the bundle")]
    EntryMissing(String),
    #[error(transparent)]
    Prepare(#[from] crate::runtime::PrepareError),
    #[error("the host could not {0}")]
    Io(String),
}

/// A queued build.
struct Job {
    deployment: Uuid,
    entry: String,
}

/// Queues builds for the builder thread. Cheap to clone.
#[derive(Clone)]
pub struct Builder {
    tx: mpsc::Sender<Job>,
    data_dir: PathBuf,
}

impl Builder {
    pub fn spawn(
        runtime: Arc<Runtime>,
        writer: WriterHandle,
        data_dir: PathBuf,
    ) -> std::io::Result<Builder> {
        // Uploads cut off mid-way by a disconnect or a crash are never built.
        let _ = std::fs::remove_dir_all(data_dir.join("uploads"));
        let (tx, rx) = mpsc::channel::<Job>();
        let dir = data_dir.clone();
        std::thread::Builder::new()
            .name("builder".into())
            .spawn(move || {
                for job in rx {
                    run_job(&runtime, &writer, &dir, job);
                }
            })?;
        Ok(Builder { tx, data_dir })
    }

    /// Where an uploaded bundle waits for its build.
    pub fn bundle_path(&self, deployment: Uuid) -> PathBuf {
        self.data_dir.join("bundles").join(deployment.to_string())
    }

    /// A fresh path to receive an upload before its deployment exists.
    pub fn upload_path(&self) -> std::io::Result<PathBuf> {
        let dir = self.data_dir.join("uploads");
        std::fs::create_dir_all(&dir)?;
        Ok(dir.join(Uuid::now_v7().to_string()))
    }

    /// Moves an upload into place and queues its build.
    pub fn enqueue(&self, record: &DeploymentRecord, upload: &Path) -> std::io::Result<()> {
        let bundle = self.bundle_path(record.id);
        if let Some(parent) = bundle.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::rename(upload, &bundle)?;
        if let Some(parent) = bundle.parent() {
            // The bundle's new name survives a power cut (its bytes were fsynced on upload).
            crate::util::sync_dir(parent)?;
        }
        self.queue(record);
        Ok(())
    }

    fn queue(&self, record: &DeploymentRecord) {
        let job = Job {
            deployment: record.id,
            entry: record.entry.clone(),
        };
        if self.tx.send(job).is_err() {
            tracing::error!(deployment = %record.id, "the builder thread has stopped");
        }
    }

    /// At startup: builds interrupted by a restart run again when their
    /// bundle survived, and fail otherwise.
    pub async fn resume_interrupted(
        &self,
        store: &Store,
        writer: &WriterHandle,
    ) -> Result<(), StoreError> {
        for record in store.read(|s| s.building_deployments()).await? {
            if self.bundle_path(record.id).exists() {
                tracing::info!(deployment = %record.id, "restarting an interrupted build");
                self.queue(&record);
            } else if store.shared() {
                // Uploaded to another host, which builds it (or, if that
                // host is gone for good, it stays `building`: docs/scale-out.md).
                continue;
            } else {
                let message =
                    "the server stopped before this build started; deploy again".to_string();
                writer
                    .finish_build(record.id, BuildOutcome::Failed(message))
                    .await?;
            }
        }
        Ok(())
    }
}

fn run_job(runtime: &Runtime, writer: &WriterHandle, data_dir: &Path, job: Job) {
    let started = std::time::Instant::now();
    let bundle = data_dir.join("bundles").join(job.deployment.to_string());
    let outcome = match build(runtime, data_dir, &bundle, &job) {
        Ok(prepared) => BuildOutcome::Succeeded {
            description: prepared.description,
            artifact: prepared.artifact,
        },
        Err(err) => {
            let mut message = err.to_string();
            crate::util::truncate_utf8(&mut message, MAX_ERROR_BYTES);
            BuildOutcome::Failed(message)
        }
    };
    let status = match &outcome {
        BuildOutcome::Succeeded { .. } => "succeeded",
        BuildOutcome::Failed(_) => "failed",
    };
    match writer.blocking_finish_build(job.deployment, outcome) {
        Ok(record) => {
            let _ = std::fs::remove_file(&bundle);
            tracing::info!(
                deployment = %job.deployment,
                version = record.version,
                outcome = status,
                status = ?record.status,
                duration_ms = started.elapsed().as_secs_f64() * 1000.0,
                "build"
            );
        }
        Err(err) => {
            tracing::error!(deployment = %job.deployment, error = %err, "cannot record the build")
        }
    }
}

fn build(
    runtime: &Runtime,
    data_dir: &Path,
    bundle: &Path,
    job: &Job,
) -> Result<crate::runtime::Prepared, BuildError> {
    let work = data_dir.join("builds").join(job.deployment.to_string());
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)
        .map_err(|e| BuildError::Io(format!("create the build dir: {e}")))?;
    let result = (|| {
        unpack::unpack(bundle, &work, UnpackLimits::default())?;
        let relative = unpack::safe_relative_path(&job.entry)
            .ok_or_else(|| BuildError::EntryMissing(job.entry.clone()))?;
        let entry = work.join(relative);
        if !entry.is_file() {
            return Err(BuildError::EntryMissing(job.entry.clone()));
        }
        let bytes =
            std::fs::read(&entry).map_err(|e| BuildError::Io(format!("read the entry: {e}")))?;
        let dir = deployment_dir(data_dir, job.deployment);
        let prepared = runtime.prepare(&job.entry, &bytes, &dir)?;
        runtime
            .share_component(job.deployment, &bytes)
            .map_err(crate::runtime::PrepareError::from)?;
        Ok(prepared)
    })();
    let _ = std::fs::remove_dir_all(&work);
    result
}
