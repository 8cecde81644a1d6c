//! Starting the server: open the data dir, start the writer, runtime and
//! builder, settle what a previous process left, make sure a platform key
//! exists, then serve HTTP until SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;
use uuid::Uuid;

use crate::api::{self, Services};
use crate::build::Builder;
use crate::keys::{self, Keys};
use crate::runtime::{Redactor, Runtime};
use crate::secrets::{MasterKey, Vault};
use crate::store::postgres::{LeaseOptions, PgEngine, StoreTimeouts};
use crate::store::{CurrentRedactor, Db, KeyClass, Quotas, RedbOptions, Writer};
use crate::tokens::StreamTokens;

pub struct ServeOptions {
    pub data_dir: PathBuf,
    pub addr: SocketAddr,
    /// `AGENTHOST_BOOTSTRAP_KEY`: registered as the platform key `bootstrap`.
    pub bootstrap_key: Option<String>,
    /// `AGENTHOST_MASTER_KEY` (64 hex digits); else `<data-dir>/master.key`.
    pub master_key: Option<String>,
    /// Origins allowed to call the API from a browser (CORS).
    pub cors_origins: Vec<String>,
    /// On SIGTERM, how long running turns may take to finish.
    pub shutdown_grace: Duration,
    /// Turns running at once, and how long approvals may wait.
    pub turns: crate::runtime::TurnSettings,
    /// What agents may reach over HTTP.
    pub outbound: crate::runtime::outbound::OutboundPolicy,
    /// Cranelift's compile cache; `<data-dir>/compile-cache` when `None`.
    pub compile_cache_dir: Option<PathBuf>,
    /// The storage engine.
    pub store: StoreChoice,
    /// Ended sessions older than this are deleted; kept forever when `None`.
    pub retain_ended_sessions: Option<Duration>,
    /// Sessions of end users and the bare invocation key idle for longer
    /// are ended (`--session-idle-secs`); never when `None`.
    pub session_idle: Option<Duration>,
    /// The per-key rate limit of platform keys; off when `None`.
    pub rate_limit: Option<api::rate_limit::RateLimit>,
    /// The per-key rate limit of everyone else (invocation keys, end users,
    /// stream tokens); off when `None`.
    pub invocation_rate_limit: Option<api::rate_limit::RateLimit>,
    /// The per-app caps on open sessions and running turns.
    pub quotas: Quotas,
    /// Open streams, body read time, the approvals snapshot.
    pub api_limits: api::ApiLimits,
    /// Let apps' `[end_users] jwks_url` be plain `http` and loopback or
    /// private addresses (local identity providers, tests). Off by default.
    pub allow_insecure_jwks: bool,
    /// Webhook deliveries' address rule, retries and decision links.
    pub webhooks: crate::webhooks::WebhookOptions,
    /// The reverse proxies whose `X-Forwarded-For` names the client
    /// (`--trusted-proxy`); none by default.
    pub trusted_proxies: api::client_addr::TrustedProxies,
}

/// Where durable state lives (`--store`).
#[derive(Debug, Clone)]
pub enum StoreChoice {
    /// One redb file in the data dir: one host.
    Redb(RedbOptions),
    /// A PostgreSQL database that many hosts share.
    Postgres {
        url: String,
        lease: LeaseOptions,
        /// The server-side timeouts of every connection (docs/limits.md).
        timeouts: StoreTimeouts,
    },
}

/// A server that is listening; `run` serves until shutdown.
pub struct Server {
    listener: tokio::net::TcpListener,
    services: Arc<Services>,
    stop: watch::Sender<bool>,
    grace: Duration,
    pub local_addr: SocketAddr,
}

impl Server {
    pub async fn start(options: ServeOptions) -> anyhow::Result<Server> {
        crate::util::raise_open_file_limit();
        // The address first: a busy port fails before anything is written
        // into the data dir (it once minted a master key and a bootstrap key
        // there, then failed). Connections wait in the backlog until the
        // server below is ready to answer them.
        let listener = tokio::net::TcpListener::bind(options.addr)
            .await
            .with_context(|| format!("cannot listen on {}", options.addr))?;
        crate::util::create_private_dir(&options.data_dir).with_context(|| {
            format!("cannot create the data dir {}", options.data_dir.display())
        })?;
        // This process's id: the owner of the turns it runs.
        let boot_id = Uuid::now_v7();
        let (store, shared) = match &options.store {
            StoreChoice::Redb(redb) => {
                let path = options.data_dir.join("agenthost.redb");
                let store = Db::open_with(&path, *redb).context("cannot open the database")?;
                crate::metrics::set_store_engine("redb");
                (store, None)
            }
            StoreChoice::Postgres {
                url,
                lease,
                timeouts,
            } => {
                anyhow::ensure!(
                    options.master_key.is_some(),
                    "with --store postgres://, set AGENTHOST_MASTER_KEY (64 hex digits, the same on every host): secrets and stream tokens are shared"
                );
                let (url, lease, timeouts) = (url.clone(), *lease, *timeouts);
                // The sync client blocks: off the async workers.
                let engine = tokio::task::spawn_blocking(move || {
                    PgEngine::open_with(&url, boot_id, lease, timeouts)
                })
                .await?
                .context("cannot open the PostgreSQL store")?;
                crate::metrics::set_store_engine("postgres");
                (Db::new(engine.clone()), Some((engine, lease)))
            }
        };
        make_durable_dirs(&options.data_dir)?;
        let master = MasterKey::load(options.master_key.as_deref(), &options.data_dir)?;
        let vault = Arc::new(Vault::new(&master));
        vault
            .load(&store.read(|s| s.secrets()).await?)
            .context("cannot open the stored secrets (is this the right master key?)")?;
        // Turns the writer closes itself get their rebuilt texts redacted
        // with every secret (it does not know which ones a turn had).
        let secrets = vault.clone();
        let redact: CurrentRedactor = Arc::new(move || Redactor::new(secrets.all()));
        let writer = Writer::spawn_for_host(store.clone(), boot_id, redact, options.quotas)?;
        // Turns it restarts wait for the runtime (`start_turns` below).
        let recovery = writer.recover().await?;
        if !recovery.closed.is_empty() {
            tracing::warn!(
                count = recovery.closed.len(),
                "closed turns interrupted by the previous shutdown"
            );
        }
        let keys = load_keys(&store, &writer, &options).await?;
        let tokens = StreamTokens::new(&master, keys.clone());
        let end_users = crate::end_users::EndUsers::new(&master, options.allow_insecure_jwks);
        let runtime = Runtime::new(
            options.data_dir.clone(),
            store.clone(),
            writer.clone(),
            vault.clone(),
            options.turns,
            options.outbound,
            Some(
                &(options.compile_cache_dir.clone())
                    .unwrap_or_else(|| options.data_dir.join("compile-cache")),
            ),
        )?;
        let builder = Builder::spawn(
            runtime.clone(),
            store.clone(),
            writer.clone(),
            options.data_dir.clone(),
        )?;
        builder.resume_interrupted().await?;
        crate::expiry::start(store.clone(), writer.clone());
        crate::schedules::start(store.clone(), writer.clone());
        crate::retention::start_purges(writer.clone());
        if let Some(retain) = options.retain_ended_sessions {
            crate::retention::start(store.clone(), writer.clone(), retain);
        }
        if let Some(idle) = options.session_idle {
            crate::retention::start_idle(store.clone(), writer.clone(), idle);
        }
        if let Some((engine, lease)) = &shared {
            let host = crate::cluster::Host {
                store: store.clone(),
                writer: writer.clone(),
                runtime: runtime.clone(),
                builder: builder.clone(),
                keys: keys.clone(),
                vault: vault.clone(),
                revocations: end_users.revocations().clone(),
            };
            crate::cluster::start(engine, *lease, host)?;
        }
        if !recovery.restarted.is_empty() {
            tracing::info!(
                count = recovery.restarted.len(),
                "restarting accepted turns that never ran"
            );
        }
        // From here on the writer starts every turn it commits, beginning
        // with those that waited (`store::start`).
        writer.start_turns(runtime.turn_sink());
        let (stop, shutdown) = watch::channel(false);
        let local_addr = listener.local_addr()?;
        let links_key = crate::webhooks::links::key(&master);
        let public_url =
            (options.webhooks.public_url.clone()).unwrap_or_else(|| format!("http://{local_addr}"));
        crate::webhooks::start(crate::webhooks::Sender {
            store: store.clone(),
            writer: writer.clone(),
            vault: vault.clone(),
            options: options.webhooks.clone(),
            links_key,
            public_url,
        })?;
        let services = Arc::new(Services {
            store,
            writer,
            runtime,
            builder,
            keys,
            vault,
            tokens,
            end_users,
            shutdown,
            cors_origins: options.cors_origins,
            rate_limit: api::rate_limit::KeyLimiter::new(
                options.rate_limit,
                options.invocation_rate_limit,
            ),
            streams: api::stream_caps::StreamSlots::new(options.api_limits.streams),
            ready: Default::default(),
            auth_throttle: api::auth_throttle::AuthThrottle::new(
                options.api_limits.auth_failures_per_minute,
            ),
            limits: options.api_limits,
            webhooks: options.webhooks,
            trusted_proxies: options.trusted_proxies,
            links_key,
        });
        Ok(Server {
            listener,
            services,
            stop,
            grace: options.shutdown_grace,
            local_addr,
        })
    }

    /// Serves until SIGTERM or Ctrl-C; open event streams end at once.
    /// On SIGTERM or Ctrl-C: no new turn starts (new work gets 503), every
    /// open stream ends (clients resume after the restart with Last-Event-ID),
    /// in-flight requests finish, and running turns get the grace period.
    pub async fn run(self) -> anyhow::Result<()> {
        let stop = self.stop;
        let runtime = self.services.runtime.clone();
        let accepting = runtime.clone();
        let signal = async move {
            shutdown_signal().await;
            tracing::info!("shutting down");
            accepting.stop_accepting();
            let _ = stop.send(true);
        };
        api::serve(self.listener, self.services, signal).await?;
        let left = runtime.drain(self.grace).await;
        if left > 0 {
            tracing::warn!(
                count = left,
                "turns still running after the grace period: they are settled at the next start"
            );
        }
        tracing::info!("stopped");
        Ok(())
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// Loads every key; registers the bootstrap key; mints one when no platform key exists.
async fn load_keys(
    store: &Db,
    writer: &crate::store::WriterHandle,
    options: &ServeOptions,
) -> anyhow::Result<Keys> {
    let keys = Keys::default();
    if let Some(key) = options.bootstrap_key.as_deref().filter(|k| !k.is_empty()) {
        keys::check_bootstrap(key).map_err(anyhow::Error::msg)?;
        // Replaces the previous bootstrap key rather than piling keys up.
        writer.put_api_key(keys::bootstrap_record(key)).await?;
    }
    for record in store.read(|s| s.api_keys()).await? {
        keys.insert(&record);
    }
    if !keys.has_platform_key() {
        // Named as its file (`bootstrap-key`) and `dev`'s key: decisions
        // made with it name the approver `bootstrap` either way.
        let minted = keys::mint(KeyClass::Platform, "bootstrap", None);
        writer.put_api_key(minted.record.clone()).await?;
        keys.insert(&minted.record);
        let path = options.data_dir.join("bootstrap-key");
        crate::util::write_secret_file(&path, &minted.secret)?;
        // Never printed: stdout often ends up in a container's logs.
        println!(
            "Minted a platform API key `{}`; it is saved in {} (mode 0600), and printed nowhere",
            minted.record.prefix,
            path.display(),
        );
    }
    Ok(keys)
}

/// Creates the data dir's subdirectories and fsyncs every directory entry
/// up to the data dir's parent, so that the database file and the
/// directories later writes rename into survive a power cut; from then on
/// each write only syncs the directory it adds a name to.
fn make_durable_dirs(data_dir: &Path) -> anyhow::Result<()> {
    for sub in ["bundles", "deployments"] {
        let dir = data_dir.join(sub);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut dirs = vec![data_dir.to_path_buf()];
    dirs.extend(data_dir.parent().map(Path::to_path_buf));
    for dir in dirs.iter().filter(|d| !d.as_os_str().is_empty()) {
        crate::util::sync_dir(dir).with_context(|| format!("cannot sync {}", dir.display()))?;
    }
    Ok(())
}
