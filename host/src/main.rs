//! The `agenthost` binary: parses the command line and runs a subcommand.

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;

use agenthost::{
    Cli, Command, DeployError, DeployOptions, DeploymentStatus, KeyClass, Progress, ServeArgs,
    ServeOptions, Server, TurnSettings, bench, build_agent, create_private_dir, deploy, dev,
    keys_command, mint_key, write_secret_file,
};

/// The server allocates per event (journal encoding, fan-out to streams);
/// mimalloc's thread-local free lists beat glibc malloc there (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    agenthost::install_tls_provider();
    let cli = Cli::parse();
    let default_level = match cli.command {
        Command::Deploy(_) | Command::Bench(_) | Command::Build(_) => "warn",
        _ => "info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        // A log that cannot be written (a full disk) must not take the
        // request down with it: tracing would report it with `eprintln!`,
        // which panics when stderr itself fails.
        .log_internal_errors(false)
        // Colour codes only for a person at a terminal, not in a log file.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            std::process::exit(1);
        }
    };
    if let Err(err) = runtime.block_on(run(cli)) {
        eprintln!("error: {err:#}");
        // `deploy` says how it failed (docs/manifest.md); the rest exit 1.
        let code = (err.downcast_ref::<DeployError>()).map_or(1, DeployError::exit_code);
        std::process::exit(code);
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => {
            let server = start(&args, bootstrap_from_env()).await?;
            server.run().await
        }
        Command::Deploy(args) => {
            let deployed = deploy(&DeployOptions {
                dir: args.dir,
                url: args.remote.url,
                api_key: args.remote.api_key,
                timeout: Duration::from_secs(args.timeout_secs),
                build: !args.no_build,
                approval_policy: args.approval_policy,
                wait_for_server: args.wait_for_server,
                progress: if std::io::stderr().is_terminal() {
                    Progress::InPlace
                } else {
                    Progress::Lines
                },
            })
            .await?;
            println!(
                "deployed {} v{} ({}): status {}, routes {}",
                deployed.app,
                deployed.row.version,
                deployed.row.id,
                serde_json::to_value(deployed.row.status)
                    .ok()
                    .and_then(|s| s.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                serde_json::to_value(&deployed.row.routes).unwrap_or_default(),
            );
            if deployed.row.status == DeploymentStatus::Retired {
                let current = deployed
                    .current
                    .map_or("a higher version".into(), |v| format!("v{v}"));
                println!(
                    "note: v{} built but is retired, not current: {} of {} is current, and new sessions go there. Make this one current with POST /deployments/{}/activate.",
                    deployed.row.version, current, deployed.app, deployed.row.id
                );
            }
            Ok(())
        }
        Command::Dev(args) => {
            let key = dev_key(&args.serve.data_dir)?;
            let server = start(&args.serve, Some(key.clone())).await?;
            dev(args, server, key).await
        }
        Command::Build(args) => {
            let output =
                tokio::task::spawn_blocking(move || build_agent(&args.dir, args.output.as_deref()))
                    .await
                    .context("the build task failed")??;
            println!("built {}", output.display());
            Ok(())
        }
        Command::Keys(args) => keys_command(&args.remote, args.action).await,
        Command::Bench(args) => bench(args).await,
    }
}

fn bootstrap_from_env() -> Option<String> {
    std::env::var("AGENTHOST_BOOTSTRAP_KEY")
        .ok()
        .filter(|k| !k.is_empty())
}

async fn start(args: &ServeArgs, bootstrap_key: Option<String>) -> anyhow::Result<Server> {
    let server = Server::start(ServeOptions {
        data_dir: args.data_dir.clone(),
        addr: args.addr,
        bootstrap_key,
        master_key: std::env::var("AGENTHOST_MASTER_KEY").ok(),
        cors_origins: args.cors_origins.clone(),
        shutdown_grace: Duration::from_secs(args.shutdown_grace_secs),
        turns: TurnSettings {
            max_concurrent: args.max_concurrent_turns,
            approval_timeout: args.approval_timeout.map(Into::into),
            max_journal_bytes: args.max_journal_bytes(),
            min_timer_delay: args.min_timer_delay.into(),
        },
        outbound: args.outbound_policy()?,
        store: args.store_engine()?,
        compile_cache_dir: args.compile_cache_dir.clone(),
        retain_ended_sessions: args.retain_ended_sessions.map(Into::into),
        session_idle: (args.session_idle_secs > 0)
            .then(|| Duration::from_secs(args.session_idle_secs)),
        rate_limit: args.rate_limit()?,
        invocation_rate_limit: args.invocation_rate_limit()?,
        quotas: args.quotas()?,
        api_limits: args.api_limits()?,
        allow_insecure_jwks: args.allow_insecure_jwks,
        webhooks: args.webhook_options(),
        trusted_proxies: args.trusted_proxies(),
    })
    .await?;
    println!("agenthost listening on http://{}", server.local_addr);
    Ok(server)
}

/// The dev server's key: `AGENTHOST_BOOTSTRAP_KEY`, else the one saved in the
/// data dir, else a new one saved there.
fn dev_key(data_dir: &Path) -> anyhow::Result<String> {
    if let Some(key) = bootstrap_from_env() {
        return Ok(key);
    }
    let path = data_dir.join("bootstrap-key");
    if let Ok(saved) = std::fs::read_to_string(&path)
        && !saved.trim().is_empty()
    {
        return Ok(saved.trim().to_string());
    }
    create_private_dir(data_dir)?;
    let key = mint_key(KeyClass::Platform, "dev", None).secret;
    write_secret_file(&path, &key)?;
    Ok(key)
}
