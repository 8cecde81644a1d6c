//! Deployments are built off-request, one at a time, on a dedicated thread.
//!
//! A build unpacks the uploaded bundle safely, finds `agent.entry`, runs the
//! runtime's checks (component, compiles, imports, exports, describe), keeps
//! the component and its artifact, and reports `active` or `failed` through
//! the writer. Each failure has its own message, stored truncated in `error`.
//! On a shared store a build is claimed by the host that runs it, and
//! adopted by another when that host stops (`adopt.rs`). A build that
//! panics ends `failed` and the thread goes on with the next one.

mod adopt;
#[cfg(test)]
mod llm_manifest;
pub(crate) mod manifest;
mod mcp_manifest;
pub(crate) mod unpack;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};

use uuid::Uuid;

use crate::runtime::{Runtime, deployment_dir};
use crate::store::{BuildOutcome, Db, DeploymentRecord, StoreError, WriterHandle};
use unpack::UnpackLimits;

/// Bytes of a failed build's message kept in `error`.
const MAX_ERROR_BYTES: usize = 8 * 1024;

#[derive(Debug, thiserror::Error)]
pub(crate) enum BuildError {
    #[error("{0}")]
    Bundle(String),
    #[error("the entry `{0}` named by agent.entry is missing from the bundle")]
    EntryMissing(String),
    #[error(transparent)]
    Prepare(#[from] crate::runtime::PrepareError),
    #[error("the host could not {0}")]
    Io(String),
    #[error("the build failed on an internal error of the host (logged); deploy again")]
    Panicked,
    #[error("{0}")]
    Tools(String),
}

/// A queued build.
struct Job {
    deployment: Uuid,
    entry: String,
    /// The manifest's `[mcp.<name>]` servers: no own tool of the agent may
    /// wear one's `<server>__` prefix.
    mcp_servers: Vec<String>,
    /// This host's claim on the build (shared store only), released when
    /// the job is done.
    _claim: Option<Box<dyn Send>>,
}

/// Queues builds for the builder thread. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Builder {
    tx: mpsc::Sender<Job>,
    data_dir: PathBuf,
    store: Db,
    writer: WriterHandle,
}

impl Builder {
    pub(crate) fn spawn(
        runtime: Arc<Runtime>,
        store: Db,
        writer: WriterHandle,
        data_dir: PathBuf,
    ) -> std::io::Result<Builder> {
        // Uploads cut off mid-way by a disconnect or a crash are never built.
        let _ = std::fs::remove_dir_all(data_dir.join("uploads"));
        if store.shared() {
            // The shared store keeps every bundle until its build is over.
            let _ = std::fs::remove_dir_all(data_dir.join("bundles"));
        }
        let (tx, rx) = mpsc::channel::<Job>();
        let (dir, jobs_store, jobs_writer) = (data_dir.clone(), store.clone(), writer.clone());
        std::thread::Builder::new()
            .name("builder".into())
            .spawn(move || {
                for job in rx {
                    run_job(&runtime, &jobs_store, &jobs_writer, &dir, job);
                }
            })?;
        Ok(Builder {
            tx,
            data_dir,
            store,
            writer,
        })
    }

    /// Where an uploaded bundle waits for its build.
    pub(crate) fn bundle_path(&self, deployment: Uuid) -> PathBuf {
        self.data_dir.join("bundles").join(deployment.to_string())
    }

    /// A fresh path to receive an upload before its deployment exists.
    pub(crate) fn upload_path(&self) -> std::io::Result<PathBuf> {
        let dir = self.data_dir.join("uploads");
        std::fs::create_dir_all(&dir)?;
        Ok(dir.join(Uuid::now_v7().to_string()))
    }

    /// Moves an upload into place and queues its build; on a shared store,
    /// first claims the build and stores the bundle where any host can
    /// adopt it.
    pub(crate) async fn enqueue(
        &self,
        record: &DeploymentRecord,
        upload: &Path,
    ) -> Result<(), StoreError> {
        let bundle = self.bundle_path(record.id);
        let io = |e: std::io::Error| StoreError::Storage(format!("cannot keep the bundle: {e}"));
        if let Some(parent) = bundle.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::rename(upload, &bundle).map_err(io)?;
        if let Some(parent) = bundle.parent() {
            // The bundle's new name survives a power cut (its bytes were fsynced on upload).
            crate::util::sync_dir(parent).map_err(io)?;
        }
        let claim = if self.store.shared() {
            self.share(record.id, bundle).await?
        } else {
            None
        };
        self.queue(record, claim);
        Ok(())
    }

    fn queue(&self, record: &DeploymentRecord, claim: Option<Box<dyn Send>>) {
        let servers = crate::runtime::mcp::settings::read(&record.manifest);
        let job = Job {
            deployment: record.id,
            entry: record.entry.clone(),
            mcp_servers: servers.into_keys().collect(),
            _claim: claim,
        };
        if self.tx.send(job).is_err() {
            tracing::error!(deployment = %record.id, "the builder thread has stopped");
        }
    }

    /// At startup: builds interrupted by a restart run again when their
    /// bundle survived, and fail otherwise. On a shared store the sweep
    /// adopts them instead, once their claim expired (`adopt.rs`).
    pub(crate) async fn resume_interrupted(&self) -> Result<(), StoreError> {
        if self.store.shared() {
            return Ok(());
        }
        for record in self.store.read(|s| s.building_deployments()).await? {
            if self.bundle_path(record.id).exists() {
                tracing::info!(deployment = %record.id, "restarting an interrupted build");
                self.queue(&record, None);
            } else {
                let message =
                    "the server stopped before this build started; deploy again".to_string();
                self.writer
                    .finish_build(record.id, BuildOutcome::Failed(message))
                    .await?;
            }
        }
        Ok(())
    }
}

fn run_job(runtime: &Runtime, store: &Db, writer: &WriterHandle, data_dir: &Path, job: Job) {
    let started = std::time::Instant::now();
    let bundle = data_dir.join("bundles").join(job.deployment.to_string());
    // A panic fails this build only: the thread lives on for the next one.
    let built = catch_unwind(AssertUnwindSafe(|| build(runtime, data_dir, &bundle, &job)))
        .unwrap_or_else(|panic| {
            let what = panic_text(panic.as_ref());
            tracing::error!(deployment = %job.deployment, panic = %what, "a build panicked");
            let _ =
                std::fs::remove_dir_all(data_dir.join("builds").join(job.deployment.to_string()));
            Err(BuildError::Panicked)
        });
    let outcome = match built {
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
    let recorded = writer.blocking_finish_build(job.deployment, outcome);
    let over = matches!(
        recorded,
        Ok(_) | Err(StoreError::Conflict(_) | StoreError::NotFound { .. })
    );
    if over {
        // Done, here or (a conflict) by a host that adopted the build.
        let _ = std::fs::remove_file(&bundle);
        if let Err(err) = store.forget_build(job.deployment) {
            tracing::warn!(deployment = %job.deployment, error = %err, "cannot drop a built bundle");
        }
    }
    if recorded.is_ok() && status == "succeeded" {
        // Links its libraries for now; compiled whole in the background.
        runtime.compile_whole_later(job.deployment);
    }
    match recorded {
        Ok(record) => tracing::info!(
            deployment = %job.deployment,
            version = record.version,
            outcome = status,
            status = ?record.status,
            duration_ms = started.elapsed().as_secs_f64() * 1000.0,
            "build"
        ),
        Err(StoreError::Conflict(_)) => tracing::warn!(
            deployment = %job.deployment,
            "another host finished this build first (it adopted it): this result is dropped"
        ),
        Err(err) => {
            tracing::error!(deployment = %job.deployment, error = %err, "cannot record the build")
        }
    }
}

/// Refuses an agent whose own tool wears a declared MCP server's
/// `<server>__` prefix: its calls would be taken for that server's.
pub(super) fn own_tools_apart(
    description: &crate::store::AgentDescription,
    servers: &[String],
) -> Result<(), BuildError> {
    for tool in &description.tools {
        if let Some(server) = (servers.iter()).find(|s| tool.name.starts_with(&format!("{s}__"))) {
            return Err(BuildError::Tools(format!(
                "the agent's own tool `{}` starts with `{server}__`, the prefix of the MCP server `[mcp.{server}]`'s tools: rename the tool or the server",
                tool.name
            )));
        }
    }
    Ok(())
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
        injected_panic(&job.entry);
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
        own_tools_apart(&prepared.description, &job.mcp_servers)?;
        runtime
            .share_component(job.deployment, &bytes)
            .map_err(crate::runtime::PrepareError::from)?;
        Ok(prepared)
    })();
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// A panic's message, when it is text.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    (panic.downcast_ref::<&str>().copied())
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not text)")
}

/// A test-only fault: when the server's environment sets
/// `AGENTHOST_TEST_PANIC_BUILD` to an entry name, the build of a
/// deployment whose `agent.entry` is that name panics after unpacking
/// (tests/e2e/deploy.rs). Unset in any real deployment; read once.
fn injected_panic(entry: &str) {
    static ENTRY: OnceLock<Option<String>> = OnceLock::new();
    let marker = ENTRY.get_or_init(|| {
        std::env::var("AGENTHOST_TEST_PANIC_BUILD")
            .ok()
            .filter(|m| !m.is_empty())
    });
    if marker.as_deref() == Some(entry) {
        panic!("AGENTHOST_TEST_PANIC_BUILD: injected panic in a build");
    }
}
