//! `agenthost deploy`: build, package, upload, then poll until the build resolves.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::lang;
use super::package::package;
use crate::api::views::{DeploymentView, ErrorBody};
use crate::build::manifest::Manifest;
use crate::store::DeploymentStatus;

pub struct DeployOptions {
    pub dir: PathBuf,
    pub url: String,
    pub api_key: String,
    pub timeout: Duration,
    pub build: bool,
    /// `SERVICE_APPROVAL_POLICY` for this deployment (a JSON array of tool names).
    pub approval_policy: Option<String>,
}

/// The deployment row once its build resolved.
pub struct Deployed {
    pub app: String,
    pub row: DeploymentView,
}

/// Deploys `dir` and waits for its build; errors carry the build's message.
pub async fn deploy(options: &DeployOptions) -> anyhow::Result<Deployed> {
    let dir = &options.dir;
    let manifest_path = dir.join("agenthost.toml");
    let manifest_text = std::fs::read_to_string(&manifest_path)
        .with_context(|| format!("cannot read {}", manifest_path.display()))?;
    let manifest = Manifest::parse(&manifest_text)?;
    let entry = manifest.agent.entry().to_owned();
    let component = if options.build {
        let (dir, manifest) = (dir.clone(), manifest.clone());
        tokio::task::spawn_blocking(move || lang::build_component(&dir, &manifest)).await??
    } else {
        let path = dir.join(&entry);
        std::fs::read(&path).with_context(|| format!("cannot read the entry {}", path.display()))?
    };
    let bundle = {
        let dir = dir.clone();
        let entry = entry.clone();
        let skip = lang::always_left_out(manifest.agent.language);
        tokio::task::spawn_blocking(move || package(&dir, &entry, &component, skip)).await??
    };
    let base = options.url.trim_end_matches('/');
    let client = reqwest::Client::new();
    let mut form = reqwest::multipart::Form::new()
        .part(
            "tarball",
            reqwest::multipart::Part::bytes(bundle).file_name("bundle.tar.gz"),
        )
        .text("manifest", manifest_text);
    if let Some(policy) = &options.approval_policy {
        form = form.text("approval_policy", policy.clone());
    }
    let response = client
        .post(format!("{base}/deployments"))
        .bearer_auth(&options.api_key)
        .multipart(form)
        .send()
        .await
        .with_context(|| format!("cannot reach {base}"))?;
    let status = response.status();
    let body = response.bytes().await.unwrap_or_default();
    if status.as_u16() != 202 {
        bail!(
            "the server refused the deployment ({status}): {}",
            error_message(&body)
        );
    }
    let accepted: DeploymentView =
        serde_json::from_slice(&body).context("the server's answer is not a deployment")?;
    let (id, app_id, version) = (accepted.id, accepted.app_id, accepted.version);
    let app = manifest.app.slug.clone();
    let started = Instant::now();
    loop {
        let rows: Vec<DeploymentView> = client
            .get(format!("{base}/apps/{app_id}/deployments"))
            .bearer_auth(&options.api_key)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let row = rows
            .into_iter()
            .find(|r| r.id == id)
            .context("the deployment disappeared from its app's list")?;
        match row.status {
            DeploymentStatus::Building => {}
            DeploymentStatus::Failed => {
                eprintln!();
                bail!(
                    "the build of {app} v{version} failed:\n{}",
                    row.error.as_deref().unwrap_or("(no message)")
                );
            }
            DeploymentStatus::Active | DeploymentStatus::Retired => {
                eprintln!();
                return Ok(Deployed { app, row });
            }
        }
        if started.elapsed() > options.timeout {
            eprintln!();
            bail!(
                "the build of {app} v{version} did not finish within {} s (it may still finish: see GET /apps/{app_id}/deployments)",
                options.timeout.as_secs()
            );
        }
        eprint!(
            "\rbuilding {app} v{version} ... {} s",
            started.elapsed().as_secs()
        );
        let _ = std::io::stderr().flush();
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The message of an error body, or the body as it came.
fn error_message(body: &[u8]) -> String {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(error) => error.error.message,
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    }
}
