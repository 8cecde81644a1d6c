//! `agenthost deploy`: build, package, upload, then poll until the build
//! resolves, all within `--timeout-secs` from the upload on; each way it
//! can fail has its own exit status (`Failure`, docs/manifest.md).

mod net;

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::lang;
use super::package::package;
use crate::api::views::DeploymentView;
use crate::build::manifest::Manifest;
use crate::store::DeploymentStatus;
use net::Retry;

pub struct DeployOptions {
    pub dir: PathBuf,
    pub url: String,
    pub api_key: String,
    /// For the upload and the build together.
    pub timeout: Duration,
    pub build: bool,
    /// `SERVICE_APPROVAL_POLICY` for this deployment (a JSON array of tool names).
    pub approval_policy: Option<String>,
    /// How the build's progress shows on stderr.
    pub progress: Progress,
    /// Retry when nothing listens at `url` yet; else that fails at once.
    pub wait_for_server: bool,
}

/// How `deploy` shows a build's progress on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// One line, rewritten in place (`\r`): a terminal nothing else writes to.
    InPlace,
    /// A line of its own every few seconds: a log file, or a terminal the
    /// server logs to as well (`agenthost dev`).
    Lines,
}

/// How long the key is checked again after an upload's connection failed.
const RECHECK: Duration = Duration::from_secs(5);

/// Seconds between two progress lines (`Progress::Lines`).
const PROGRESS_LINE_SECS: u64 = 5;

/// The deployment row once its build resolved.
pub struct Deployed {
    pub app: String,
    pub row: DeploymentView,
    /// The app's current version when the build resolved (not `row`'s when it is `retired`).
    pub current: Option<u64>,
}

/// Why a deploy stopped; its exit status is the discriminant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// 1: anything else: the project cannot be read or packaged, the
    /// manifest is invalid, an answer is not what the API promises.
    Other = 1,
    /// 3: the build failed: the local one (cargo, componentize-py, ...)
    /// or the server's (the deployment is `failed`).
    BuildFailed = 3,
    /// 4: `--timeout-secs` passed before the build resolved (the upload
    /// included); the build may still finish.
    TimedOut = 4,
    /// 5: the server refused (4xx: a bad key, a refused manifest, a bundle
    /// too large), or kept answering 429 until the timeout.
    Refused = 5,
    /// 6: the server could not be reached, or failed (5xx), until the timeout.
    Unreachable = 6,
}

/// A failed deploy: the message and the exit status.
#[derive(Debug, thiserror::Error)]
#[error("{error:#}")]
pub struct DeployError {
    pub failure: Failure,
    error: anyhow::Error,
}

impl DeployError {
    fn new(failure: Failure, error: anyhow::Error) -> Self {
        DeployError { failure, error }
    }

    /// The process's exit status for it.
    pub fn exit_code(&self) -> i32 {
        self.failure as i32
    }
}

trait Classify<T> {
    fn or_fail(self, failure: Failure) -> Result<T, DeployError>;
}

impl<T, E: Into<anyhow::Error>> Classify<T> for Result<T, E> {
    fn or_fail(self, failure: Failure) -> Result<T, DeployError> {
        self.map_err(|error| DeployError::new(failure, error.into()))
    }
}

/// Deploys `dir` and waits for its build; errors carry the build's message.
pub async fn deploy(options: &DeployOptions) -> Result<Deployed, DeployError> {
    let dir = &options.dir;
    let manifest_path = dir.join("agenthost.toml");
    let manifest_text = std::fs::read_to_string(&manifest_path)
        .with_context(|| format!("cannot read {}", manifest_path.display()))
        .or_fail(Failure::Other)?;
    let manifest = Manifest::parse(&manifest_text).or_fail(Failure::Other)?;
    let entry = manifest.agent.entry().to_owned();
    let base = options.url.trim_end_matches('/');
    let client = reqwest::Client::new();
    let slug = manifest.app.slug.clone();
    let component = if options.build {
        let (dir, manifest) = (dir.clone(), manifest.clone());
        tokio::task::spawn_blocking(move || lang::build_component(&dir, &manifest))
            .await
            .context("the build task failed")
            .or_fail(Failure::Other)?
            .or_fail(Failure::BuildFailed)?
    } else {
        let path = dir.join(&entry);
        std::fs::read(&path)
            .with_context(|| format!("cannot read the entry {}", path.display()))
            .or_fail(Failure::Other)?
    };
    let bundle = {
        let dir = dir.clone();
        let entry = entry.clone();
        let skip = lang::always_left_out(manifest.agent.language);
        tokio::task::spawn_blocking(move || package(&dir, &entry, &component, skip))
            .await
            .context("the packaging task failed")
            .and_then(|packaged| packaged)
            .or_fail(Failure::Other)?
    };
    // The deadline covers the upload and the build from here on.
    let deadline = Instant::now() + options.timeout;
    // A bad key is refused as such, never as a failed upload; a URL where
    // nothing listens is said at once (a typo once looked like a 10-minute
    // hang), unless asked to wait for a server still starting. After the
    // local build: a missing toolchain is said whatever the URL.
    let first_contact = if options.wait_for_server {
        Retry::Idempotent
    } else {
        Retry::IdempotentOnceReached
    };
    net::check_key(
        &client,
        base,
        &options.api_key,
        &slug,
        deadline,
        first_contact,
    )
    .await?;
    let upload = || {
        let mut form = reqwest::multipart::Form::new()
            .part(
                "tarball",
                reqwest::multipart::Part::bytes(bundle.clone()).file_name("bundle.tar.gz"),
            )
            .text("manifest", manifest_text.clone());
        if let Some(policy) = &options.approval_policy {
            form = form.text("approval_policy", policy.clone());
        }
        (client.post(format!("{base}/deployments")))
            .bearer_auth(&options.api_key)
            .multipart(form)
    };
    let answer = match net::call("the upload", deadline, Retry::NotActedOn, upload).await {
        Ok(answer) => answer,
        Err(err) if err.failure == Failure::Unreachable => {
            // A server that refuses the upload (a key revoked since the
            // check) closes the connection before reading the body: ask again.
            let again = Instant::now() + RECHECK;
            match net::check_key(
                &client,
                base,
                &options.api_key,
                &slug,
                again,
                Retry::Idempotent,
            )
            .await
            {
                Err(refusal) if refusal.failure == Failure::Refused => return Err(refusal),
                _ => return Err(err),
            }
        }
        Err(err) => return Err(err),
    };
    if answer.status.as_u16() != 202 {
        return Err(DeployError::new(
            Failure::Other,
            anyhow::anyhow!(
                "the upload: unexpected answer {}: {}",
                answer.status,
                net::error_message(&answer.body)
            ),
        ));
    }
    let accepted: DeploymentView = serde_json::from_slice(&answer.body)
        .context("the server's answer is not a deployment")
        .or_fail(Failure::Other)?;
    let (id, app_id, version) = (accepted.id, accepted.app_id, accepted.version);
    let app = slug;
    let started = Instant::now();
    // When the last progress was shown (seconds into the build).
    let mut shown: Option<u64> = None;
    if options.progress == Progress::Lines {
        eprintln!("building {app} v{version} ...");
        shown = Some(0);
    }
    let timed_out = || {
        DeployError::new(
            Failure::TimedOut,
            anyhow::anyhow!(
                "the build of {app} v{version} did not finish within {} s (it may still finish: see GET /apps/{app_id}/deployments)",
                options.timeout.as_secs()
            ),
        )
    };
    loop {
        let list = || {
            (client.get(format!("{base}/apps/{app_id}/deployments"))).bearer_auth(&options.api_key)
        };
        let answer = match net::call("polling the build", deadline, Retry::Idempotent, list).await {
            Ok(answer) => answer,
            Err(err) if err.failure == Failure::TimedOut => return Err(timed_out()),
            Err(err) => return Err(err),
        };
        let rows: Vec<DeploymentView> = serde_json::from_slice(&answer.body)
            .context("the server's answer is not a list of deployments")
            .or_fail(Failure::Other)?;
        let current = rows.iter().find(|r| r.active).map(|r| r.version);
        let row = (rows.into_iter().find(|r| r.id == id))
            .context("the deployment disappeared from its app's list")
            .or_fail(Failure::Other)?;
        // Ends the line rewritten in place, if any.
        let end_line = || {
            if options.progress == Progress::InPlace && shown.is_some() {
                eprintln!();
            }
        };
        match row.status {
            DeploymentStatus::Building => {}
            DeploymentStatus::Failed => {
                end_line();
                return Err(DeployError::new(
                    Failure::BuildFailed,
                    anyhow::anyhow!(
                        "the build of {app} v{version} failed:\n{}",
                        row.error.as_deref().unwrap_or("(no message)")
                    ),
                ));
            }
            DeploymentStatus::Active | DeploymentStatus::Retired => {
                end_line();
                return Ok(Deployed { app, row, current });
            }
        }
        let pause = Duration::from_millis(250);
        if Instant::now() + pause >= deadline {
            end_line();
            return Err(timed_out());
        }
        let secs = started.elapsed().as_secs();
        match options.progress {
            Progress::InPlace => {
                eprint!("\rbuilding {app} v{version} ... {secs} s");
                let _ = std::io::stderr().flush();
                shown = Some(secs);
            }
            Progress::Lines => {
                if shown.is_none_or(|last| secs >= last + PROGRESS_LINE_SECS) {
                    eprintln!("building {app} v{version} ... {secs} s");
                    shown = Some(secs);
                }
            }
        }
        tokio::time::sleep(pause).await;
    }
}
