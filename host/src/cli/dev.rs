//! `agenthost dev DIR`: serve, deploy DIR, say how to reach it (the console,
//! a key, curl commands, the redeploy command), and watch DIR's sources:
//! a change rebuilds and redeploys while the server and its sessions go on.
//!
//! Watching is the default, as `langgraph dev` reloads unless `--no-reload`
//! and `wrangler dev` rebuilds on every save: a dev server that serves stale
//! code after an edit is the surprise. `--no-watch` turns it off.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use super::ServeArgs;
use super::deploy::{DeployOptions, Deployed, Progress, deploy};
use super::watch::Watch;
use crate::server::Server;

#[derive(clap::Args)]
pub struct DevArgs {
    #[command(flatten)]
    pub serve: ServeArgs,
    /// The agent project to deploy.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Rebuild and redeploy when the project's sources change (the default).
    #[arg(long, overrides_with = "no_watch")]
    pub watch: bool,
    /// Deploy once and do not watch the sources.
    #[arg(long)]
    pub no_watch: bool,
}

/// Runs `agenthost dev` on a started `server` whose platform key is `key`.
pub async fn dev(args: DevArgs, server: Server, key: String) -> anyhow::Result<()> {
    let url = format!("http://{}", server.local_addr);
    let dir = args.dir;
    println!("Console: {url}/ (sign in with the key printed below)");
    println!(
        "Redeploy by hand: AGENTHOST_URL={url} AGENTHOST_API_KEY={key} {} deploy {}",
        this_program(),
        dir.display()
    );
    // Started before the first build, so an edit made during it is not missed.
    let mut watch = if args.no_watch {
        None
    } else {
        Some(Watch::start(&dir, &args.serve.data_dir).context("cannot watch the project")?)
    };
    let mut serving = tokio::spawn(server.run());
    let options = DeployOptions {
        dir: dir.clone(),
        url: url.clone(),
        api_key: key.clone(),
        timeout: Duration::from_secs(600),
        build: true,
        approval_policy: None,
        // `dev`'s own server is listening: a refused connection is a restart.
        wait_for_server: true,
        // The server logs to the same stderr: progress on lines of its own.
        progress: Progress::Lines,
    };
    let mut shown = false;
    // A deploy ends with the server: a SIGTERM mid-build stops `dev`, not
    // a poll retrying against a server that is gone.
    let first = tokio::select! {
        served = &mut serving => return served.context("the server task failed")?,
        outcome = deploy(&options) => outcome,
    };
    match first {
        Ok(deployed) => {
            try_it(&deployed, &url, &key);
            shown = true;
        }
        Err(err) if watch.is_some() => {
            eprintln!("error: {err:#}");
            println!(
                "The deploy failed; the next change to {} tries again.",
                dir.display()
            );
        }
        Err(err) => return Err(err.into()),
    }
    if watch.is_some() {
        println!(
            "Watching {}: a change to its sources rebuilds and redeploys (--no-watch turns this off).",
            dir.display()
        );
    }
    println!("Ctrl-C stops the server.");
    let Some(watch) = watch.as_mut() else {
        return serving.await.context("the server task failed")?;
    };
    loop {
        tokio::select! {
            served = &mut serving => return served.context("the server task failed")?,
            changed = watch.changed() => {
                let Some(changed) = changed else {
                    return serving.await.context("the server task failed")?;
                };
                println!("{} changed: redeploying {} ...", changed.display(), dir.display());
                let outcome = tokio::select! {
                    served = &mut serving => return served.context("the server task failed")?,
                    outcome = deploy(&options) => outcome,
                };
                match outcome {
                    Ok(deployed) => {
                        let version = deployed.row.version;
                        println!(
                            "Redeployed {} v{version}: new sessions get v{version}; sessions already started keep their version.",
                            deployed.app
                        );
                        if !shown {
                            try_it(&deployed, &url, &key);
                            shown = true;
                        }
                    }
                    Err(err) => {
                        eprintln!("error: {err:#}");
                        println!("The redeploy failed; the last good version still serves. Waiting for the next change.");
                    }
                }
            }
        }
    }
}

/// The key and curl commands to try a deployed app.
fn try_it(deployed: &Deployed, url: &str, key: &str) {
    let app = &deployed.app;
    let route = (deployed.row.routes.as_ref())
        .and_then(|routes| routes.first())
        .map_or("/chat", String::as_str);
    println!(
        "\nDeployed {app} v{} at {url}. Try it:\n\n  export AGENTHOST_API_KEY={key}\n  SID=$(curl -s -X POST {url}/sessions -H \"Authorization: Bearer $AGENTHOST_API_KEY\" -H 'content-type: application/json' -d '{{\"app\":\"{app}\",\"route\":\"{route}\",\"input\":\"hello agent host\"}}' | sed -E 's/.*\"session_id\":\"([^\"]+)\".*/\\1/')\n  curl -N {url}/sessions/$SID/events -H \"Authorization: Bearer $AGENTHOST_API_KEY\"\n\nA follow-up turn:\n\n  curl -s -X POST {url}/sessions/$SID/input -H \"Authorization: Bearer $AGENTHOST_API_KEY\" -H 'content-type: application/json' -d '{{\"input\":\"what did I say before?\"}}'\n\nThe console, at {url}/, shows the session live.\n",
        deployed.row.version
    );
}

/// How to run this program again from here: its path relative to the
/// working directory when it is under it (`target/release/agenthost` after
/// `cargo run`), else its name.
fn this_program() -> String {
    let exe = std::env::current_exe().ok();
    let cwd = std::env::current_dir().ok();
    match (exe, cwd) {
        (Some(exe), Some(cwd)) => match exe.strip_prefix(&cwd) {
            Ok(relative) => relative.display().to_string(),
            Err(_) => on_path_or(&exe),
        },
        _ => "agenthost".into(),
    }
}

/// `agenthost` when that name on PATH is `exe`, else `exe` in full.
fn on_path_or(exe: &Path) -> String {
    let on_path = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            dir.join("agenthost")
                .canonicalize()
                .is_ok_and(|found| exe.canonicalize().is_ok_and(|exe| exe == found))
        })
    });
    if on_path {
        "agenthost".into()
    } else {
        exe.display().to_string()
    }
}
