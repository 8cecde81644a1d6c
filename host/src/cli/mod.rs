//! The command line: `agenthost serve`, `agenthost deploy`, `agenthost dev`,
//! `agenthost build`, `agenthost keys`, `agenthost bench`.

mod bench;
mod build;
mod deploy;
mod dev;
mod keys;
mod lang;
mod package;
mod watch;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

pub use bench::{BenchArgs, bench};
pub use build::build;
pub use deploy::{DeployError, DeployOptions, Progress, deploy};
pub use dev::{DevArgs, dev};
pub(crate) use keys::KeysAction;
pub use keys::keys;

/// `--invocation-max-open-sessions-per-app` unless the operator says otherwise.
pub(crate) const DEFAULT_INVOCATION_OPEN_SESSIONS: u64 = 10_000;
/// `--invocation-max-running-turns-per-app` unless the operator says otherwise.
pub(crate) const DEFAULT_INVOCATION_RUNNING_TURNS: u64 = 64;

/// `--invocation-share-per-principal` unless the operator says otherwise.
pub(crate) const DEFAULT_INVOCATION_SHARE_PERCENT: u64 = 1;

/// `--session-idle-secs` unless the operator says otherwise: a day.
pub(crate) const DEFAULT_SESSION_IDLE_SECS: u64 = 24 * 3600;

/// `--max-session-journal-mb` unless the operator says otherwise.
pub(crate) const DEFAULT_SESSION_JOURNAL_MB: u64 = 1024;

#[derive(Parser)]
#[command(
    name = "agenthost",
    version,
    about = "Host AI agents built as WebAssembly components"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the server.
    Serve(ServeArgs),
    /// Build an agent project (Rust, Python or TypeScript), upload it, and wait for its build.
    ///
    /// Exit status: 0 deployed (`active`, or `retired` when a higher version
    /// is current); 1 anything else (the project, the manifest, an
    /// unexpected answer); 3 the build failed (local or on the server); 4
    /// timed out (--timeout-secs, upload included; the build may still
    /// finish); 5 refused by the server (4xx, e.g. a bad key); 6 could not
    /// reach the server, or it failed (5xx), until the timeout. Transient
    /// failures (5xx, 429) are retried with backoff; so is a refused
    /// connection once the server has answered, or from the start with
    /// --wait-for-server (else nothing listening at --url exits 6 at once).
    Deploy(DeployArgs),
    /// Run the server, deploy DIR to it, print the console's address, a key
    /// and curl commands to try it, and redeploy when DIR's sources change.
    ///
    /// A change to the sources (not to build outputs, dependencies, ignored
    /// files or the data dir) rebuilds and redeploys: new sessions get the
    /// new version, sessions already started keep theirs, and the server
    /// goes on. `--no-watch` deploys once.
    Dev(DevArgs),
    /// Build an agent project's component without deploying it.
    Build(BuildArgs),
    /// Mint, list and revoke API keys of a running server.
    Keys(KeysArgs),
    /// Measure a running server with the `examples/bench` agent (docs/bench.md).
    Bench(BenchArgs),
}

/// Which server to talk to, and as whom.
#[derive(clap::Args)]
pub struct Remote {
    /// The server's base URL.
    #[arg(long, env = "AGENTHOST_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// A platform API key (the first one is in `<data-dir>/bootstrap-key`).
    #[arg(long, env = "AGENTHOST_API_KEY", hide_env_values = true)]
    pub api_key: String,
}

#[derive(clap::Args)]
pub struct KeysArgs {
    #[command(flatten)]
    pub remote: Remote,
    #[command(subcommand)]
    pub action: KeysAction,
}

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Where the database, components and keys live.
    #[arg(long, default_value = "./.agenthost", env = "AGENTHOST_DATA_DIR")]
    pub data_dir: PathBuf,
    /// The address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080", env = "AGENTHOST_ADDR")]
    pub addr: SocketAddr,
    /// An origin allowed to call the API from a browser (CORS); repeat it,
    /// or give a comma-separated list in the environment variable.
    #[arg(
        long = "cors-origin",
        env = "AGENTHOST_CORS_ORIGINS",
        value_delimiter = ','
    )]
    pub cors_origins: Vec<String>,
    /// On SIGTERM, seconds running turns get to finish before the process exits.
    #[arg(long, default_value_t = 10, env = "AGENTHOST_SHUTDOWN_GRACE_SECS")]
    pub shutdown_grace_secs: u64,
    /// Turns running at once; further turns queue until a slot frees.
    #[arg(long, default_value_t = crate::runtime::DEFAULT_MAX_CONCURRENT_TURNS, env = "AGENTHOST_MAX_CONCURRENT_TURNS")]
    pub max_concurrent_turns: usize,
    /// How long an approval may wait before the call is denied by
    /// `timeout` (e.g. `15m`, `24h`), for deployments whose manifest sets
    /// no `limits.approval_timeout_secs`. Off by default: approvals wait.
    #[arg(long, env = "AGENTHOST_APPROVAL_TIMEOUT", value_name = "DURATION")]
    pub approval_timeout: Option<humantime::Duration>,
    /// The soonest an agent's timer (`schedule`) may be due after the turn
    /// that set it (e.g. `1s`, `500ms`): a sooner `after-ms` or `at` is due
    /// then. Keeps an agent from running turns back to back on its own.
    #[arg(
        long,
        default_value = "1s",
        env = "AGENTHOST_MIN_TIMER_DELAY",
        value_name = "DURATION"
    )]
    pub min_timer_delay: humantime::Duration,
    /// Where durable state lives: `redb` (the default: one file in the data
    /// dir) or `postgres://USER@HOST:PORT/DB`, which many hosts can share
    /// (docs/scale-out.md). With PostgreSQL the data dir holds only this
    /// host's compiled artifacts and scratch files.
    #[arg(long, default_value = "redb", env = "AGENTHOST_STORE")]
    pub store: String,
    /// With PostgreSQL: seconds a host's lease on a running turn lasts
    /// without renewal; another host settles the turn at most about this
    /// long after its host died (renewals and sweeps run every third of it).
    #[arg(long, default_value_t = 5, env = "AGENTHOST_LEASE_SECS")]
    pub lease_secs: u64,
    /// With PostgreSQL: seconds one statement of the store may run (waiting
    /// for row locks included) before the server cancels it; `0`: no
    /// limit (docs/limits.md).
    #[arg(
        long,
        default_value_t = 30,
        env = "AGENTHOST_STORE_STATEMENT_TIMEOUT_SECS"
    )]
    pub store_statement_timeout_secs: u64,
    /// With PostgreSQL: seconds a connection of the store may sit idle
    /// inside a transaction before the server ends it and rolls it back
    /// (a stalled host's row locks are freed); `0`: no limit.
    #[arg(
        long,
        default_value_t = 10,
        env = "AGENTHOST_STORE_IDLE_IN_TRANSACTION_SECS"
    )]
    pub store_idle_in_transaction_secs: u64,
    /// Where compiled functions are kept across deploys, so a redeploy
    /// compiles only what changed; several servers may share one
    /// directory. Default: `<data-dir>/compile-cache`.
    #[arg(long, env = "AGENTHOST_COMPILE_CACHE_DIR", value_name = "DIR")]
    pub compile_cache_dir: Option<PathBuf>,
    /// The journal's page cache in MiB (redb's; the kernel caches the file beyond it).
    #[arg(long, default_value_t = crate::store::redb::DEFAULT_CACHE_BYTES >> 20, env = "AGENTHOST_JOURNAL_CACHE_MB")]
    pub journal_cache_mb: usize,
    /// Every journal commit also saves redb's allocator state, in two
    /// fsyncs instead of one: a restart after a crash opens at once instead
    /// of checking the whole file first (seconds per GiB). For large
    /// journals where restart time matters more than commit latency.
    #[arg(long, env = "AGENTHOST_JOURNAL_QUICK_REPAIR")]
    pub journal_quick_repair: bool,
    /// The outbound ceiling: origins any deployment may call at most
    /// (`scheme://host[:port]`, `*.` subdomains, `:*` any port; `*` for
    /// anything). A deployment reaches its `[outbound] allow` within it.
    #[arg(
        long = "outbound-allow",
        env = "AGENTHOST_OUTBOUND_ALLOW",
        value_delimiter = ',',
        default_value = "*"
    )]
    pub outbound_allow: Vec<String>,
    /// Let agents reach loopback, private and link-local addresses (this
    /// host, the LAN, cloud metadata). Off by default.
    #[arg(long, env = "AGENTHOST_OUTBOUND_ALLOW_PRIVATE")]
    pub outbound_allow_private: bool,
    /// Let apps' `[end_users] jwks_url` use plain `http` and loopback or
    /// private addresses (a local identity provider, tests). Off by default:
    /// `https` and public addresses only.
    #[arg(long, env = "AGENTHOST_ALLOW_INSECURE_JWKS")]
    pub allow_insecure_jwks: bool,
    /// Delete ended sessions (journal and all) this long after they ended,
    /// e.g. `30d` or `12h`; checked every minute. Off by default: kept forever.
    #[arg(long, env = "AGENTHOST_RETAIN_ENDED_SESSIONS", value_name = "DURATION")]
    pub retain_ended_sessions: Option<humantime::Duration>,
    /// Requests per second each API key may send to this host on average
    /// (event streams and /metrics excepted); over it, 429 `rate_limited`
    /// with Retry-After. 0 turns the limit off. Per host: N hosts let a key
    /// through up to N times this.
    #[arg(long, default_value_t = crate::api::rate_limit::DEFAULT_RATE, env = "AGENTHOST_RATE_LIMIT", value_name = "PER_SECOND")]
    pub rate_limit: u32,
    /// Requests a key may send at once after a quiet spell (default: twice --rate-limit).
    #[arg(long, env = "AGENTHOST_RATE_LIMIT_BURST", value_name = "N")]
    pub rate_limit_burst: Option<u32>,
    /// As --rate-limit, for invocation keys, end users and stream tokens
    /// (what ships in frontends), each with its own bucket. 0 turns it off.
    #[arg(long, default_value_t = crate::api::rate_limit::DEFAULT_INVOCATION_RATE, env = "AGENTHOST_INVOCATION_RATE_LIMIT", value_name = "PER_SECOND")]
    pub invocation_rate_limit: u32,
    /// Their burst (default: twice --invocation-rate-limit).
    #[arg(long, env = "AGENTHOST_INVOCATION_RATE_LIMIT_BURST", value_name = "N")]
    pub invocation_rate_limit_burst: Option<u32>,
    /// Sessions not ended that one app may have, across every host; a new
    /// session over it gets 429 `quota_exceeded`. Off by default.
    #[arg(long, env = "AGENTHOST_MAX_OPEN_SESSIONS_PER_APP", value_name = "N")]
    pub max_open_sessions_per_app: Option<u64>,
    /// Turns one app may have running (or waiting for a slot) at once,
    /// across every host; a turn over it (new session, input, approval
    /// decision) gets 429 `quota_exceeded`. Off by default.
    #[arg(long, env = "AGENTHOST_MAX_RUNNING_TURNS_PER_APP", value_name = "N")]
    pub max_running_turns_per_app: Option<u64>,
    /// MiB of one session's journal (its events' JSON payloads); at it the
    /// session takes no more input (409 `journal_full`) and a turn that
    /// would pass it ends with TURN_ERROR `output_limit`. 0: no cap.
    #[arg(long, default_value_t = DEFAULT_SESSION_JOURNAL_MB, env = "AGENTHOST_MAX_SESSION_JOURNAL_MB", value_name = "MIB")]
    pub max_session_journal_mb: u64,
    /// As --max-open-sessions-per-app, for sessions an invocation key or an
    /// end user opens (what ships in frontends); the count is the app's
    /// open sessions, whoever opened them. 0: no cap.
    #[arg(long, default_value_t = DEFAULT_INVOCATION_OPEN_SESSIONS, env = "AGENTHOST_INVOCATION_MAX_OPEN_SESSIONS_PER_APP", value_name = "N")]
    pub invocation_max_open_sessions_per_app: u64,
    /// As --max-running-turns-per-app, for turns an invocation key or an end
    /// user starts; the count is the app's running turns. 0: no cap.
    #[arg(long, default_value_t = DEFAULT_INVOCATION_RUNNING_TURNS, env = "AGENTHOST_INVOCATION_MAX_RUNNING_TURNS_PER_APP", value_name = "N")]
    pub invocation_max_running_turns_per_app: u64,
    /// The percent of the two caps above one end user, or one source
    /// address using the bare invocation key, may hold (rounded up, at
    /// least 8, at most the cap), so one visitor cannot fill them for
    /// everyone. The manifest's `[end_users] max_open_sessions_per_user`
    /// replaces it for an end user's open sessions. 0: no share (anyone may
    /// fill the caps); 100 is the same.
    #[arg(long, default_value_t = DEFAULT_INVOCATION_SHARE_PERCENT, env = "AGENTHOST_INVOCATION_SHARE_PER_PRINCIPAL", value_name = "PERCENT", value_parser = clap::value_parser!(u64).range(0..=100))]
    pub invocation_share_per_principal: u64,
    /// Sessions an end user or the bare invocation key opened that have
    /// had no turn (and nothing queued or scheduled) for this many seconds
    /// are ended (SESSION_ENDED, reason `idle`; the journal is kept), so
    /// they stop counting against the app's caps. 0: never.
    #[arg(long, default_value_t = DEFAULT_SESSION_IDLE_SECS, env = "AGENTHOST_SESSION_IDLE_SECS", value_name = "N")]
    pub session_idle_secs: u64,
    /// Event streams one API key (with the stream tokens it minted) may
    /// hold open on this host; one more gets 429 `too_many_streams`. 0: no cap.
    #[arg(long, default_value_t = crate::api::stream_caps::DEFAULT_PER_KEY, env = "AGENTHOST_MAX_STREAMS_PER_KEY", value_name = "N")]
    pub max_streams_per_key: usize,
    /// Event streams one end user may hold open on this host. 0: no cap.
    #[arg(long, default_value_t = crate::api::stream_caps::DEFAULT_PER_END_USER, env = "AGENTHOST_MAX_STREAMS_PER_END_USER", value_name = "N")]
    pub max_streams_per_end_user: usize,
    /// Seconds a request body may take to arrive after its head (a bundle
    /// upload gets 20 times this); later, 408 `request_timeout`.
    #[arg(long, default_value_t = crate::api::body_timeout::DEFAULT_SECS, env = "AGENTHOST_BODY_READ_TIMEOUT_SECS", value_name = "SECS")]
    pub body_read_timeout_secs: u64,
    /// Pending approvals the approvals feed's first frame carries at most
    /// (oldest first; `more` says there are others: page `GET /approvals`).
    #[arg(long, default_value_t = crate::api::limits::DEFAULT_APPROVALS_SNAPSHOT, env = "AGENTHOST_APPROVALS_SNAPSHOT_MAX", value_name = "N")]
    pub approvals_snapshot_max: usize,
    /// Turns that may wait for a slot on this host;
    /// past them, a request that would start one gets 503 `overloaded`. 0: no bound.
    #[arg(long, default_value_t = crate::api::overload::DEFAULT_MAX_QUEUED, env = "AGENTHOST_MAX_QUEUED_TURNS", value_name = "N")]
    pub max_queued_turns: usize,
    /// Failed authentications one source address (an IPv6 /64) may make a
    /// minute; past them, everything it sends with a credential gets 429
    /// `too_many_auth_failures` until the minute ends. 0 turns it off.
    #[arg(long, default_value_t = crate::api::auth_throttle::DEFAULT_PER_MINUTE, env = "AGENTHOST_AUTH_FAILURES_PER_MINUTE", value_name = "N")]
    pub auth_failures_per_minute: u32,
    /// A reverse proxy in front of the server (an address or a block,
    /// `10.0.0.0/8`; repeat the flag or separate with commas): a request
    /// from one is taken to come from the right-most address of its
    /// `X-Forwarded-For` that is not such a proxy (the address the bare
    /// invocation key's shares, the rate limit and the failed-authentication
    /// throttle count). None by default: the TCP peer is the client.
    #[arg(
        long,
        env = "AGENTHOST_TRUSTED_PROXY",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub trusted_proxy: Vec<crate::api::client_addr::Cidr>,
    /// Let webhook endpoints be plain `http` and on loopback, private and
    /// link-local addresses (receivers on this network, tests). Off by
    /// default: `https` to public addresses only.
    #[arg(long, env = "AGENTHOST_ALLOW_PRIVATE_WEBHOOKS")]
    pub allow_private_webhooks: bool,
    /// The delay before a failed webhook delivery's first retry; each next
    /// one doubles (with jitter, at most 1 h apart, for 24 h), e.g. `5s`.
    #[arg(
        long,
        env = "AGENTHOST_WEBHOOK_RETRY_BASE",
        value_name = "DURATION",
        default_value = "5s"
    )]
    pub webhook_retry_base: humantime::Duration,
    /// Pending deliveries one webhook endpoint may have; past them new
    /// events are not recorded for it (counted in /metrics).
    #[arg(long, env = "AGENTHOST_WEBHOOK_MAX_PENDING", value_name = "N", default_value_t = crate::store::WEBHOOK_MAX_PENDING)]
    pub webhook_max_pending: u64,
    /// How long a webhook's decision link decides after its event (e.g.
    /// `1h`), whatever the approval's deadline; a rotation of the
    /// endpoint's secret ends its links at once.
    #[arg(
        long,
        env = "AGENTHOST_DECISION_LINK_TTL",
        value_name = "DURATION",
        default_value = "24h"
    )]
    pub decision_link_ttl: humantime::Duration,
    /// This server's address as receivers reach it (`https://agents.example.com`):
    /// where webhook decision links point. Default: the listening address.
    #[arg(long, env = "AGENTHOST_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,
}

/// A rate and its burst (default: twice the rate); `None` when the rate is 0.
fn rate(
    per_second: u32,
    burst: Option<u32>,
    burst_flag: &str,
) -> anyhow::Result<Option<crate::api::rate_limit::RateLimit>> {
    use std::num::NonZeroU32;
    let Some(per_second) = NonZeroU32::new(per_second) else {
        return Ok(None);
    };
    let burst = match burst {
        None => per_second.saturating_mul(NonZeroU32::MIN.saturating_add(1)),
        Some(burst) => NonZeroU32::new(burst)
            .ok_or_else(|| anyhow::anyhow!("{burst_flag}: must be 1 or more"))?,
    };
    Ok(Some(crate::api::rate_limit::RateLimit {
        per_second,
        burst,
    }))
}

impl ServeArgs {
    /// The engine `--store` names.
    pub fn store_engine(&self) -> anyhow::Result<crate::server::StoreChoice> {
        use crate::server::StoreChoice;
        let store = self.store.trim();
        if store == "redb" {
            return Ok(StoreChoice::Redb(crate::store::RedbOptions {
                cache_bytes: self.journal_cache_mb.saturating_mul(1 << 20),
                quick_repair: self.journal_quick_repair,
            }));
        }
        if store.starts_with("postgres://") || store.starts_with("postgresql://") {
            let lease = crate::store::postgres::LeaseOptions {
                ttl: Duration::from_secs(self.lease_secs.max(1)),
            };
            let timeouts = crate::store::postgres::StoreTimeouts {
                statement: Duration::from_secs(self.store_statement_timeout_secs),
                idle_in_transaction: Duration::from_secs(self.store_idle_in_transaction_secs),
            };
            return Ok(StoreChoice::Postgres {
                url: store.to_string(),
                lease,
                timeouts,
            });
        }
        anyhow::bail!("--store: expected `redb` or a postgres:// URL, got `{store}`")
    }

    /// The per-key rate limit of platform keys these flags describe (`None`: off).
    pub fn rate_limit(&self) -> anyhow::Result<Option<crate::api::rate_limit::RateLimit>> {
        rate(self.rate_limit, self.rate_limit_burst, "--rate-limit-burst")
    }

    /// The per-key rate limit of everyone else (`None`: off).
    pub fn invocation_rate_limit(
        &self,
    ) -> anyhow::Result<Option<crate::api::rate_limit::RateLimit>> {
        rate(
            self.invocation_rate_limit,
            self.invocation_rate_limit_burst,
            "--invocation-rate-limit-burst",
        )
    }

    /// The reverse proxies `--trusted-proxy` names.
    pub fn trusted_proxies(&self) -> crate::api::client_addr::TrustedProxies {
        crate::api::client_addr::TrustedProxies(self.trusted_proxy.clone())
    }

    /// The API limits these flags describe.
    pub fn api_limits(&self) -> anyhow::Result<crate::api::ApiLimits> {
        anyhow::ensure!(
            self.body_read_timeout_secs > 0,
            "--body-read-timeout-secs: must be 1 or more"
        );
        anyhow::ensure!(
            self.approvals_snapshot_max > 0,
            "--approvals-snapshot-max: must be 1 or more"
        );
        Ok(crate::api::ApiLimits {
            streams: crate::api::stream_caps::StreamCaps {
                per_key: self.max_streams_per_key,
                per_end_user: self.max_streams_per_end_user,
            },
            body_timeout: crate::api::body_timeout::BodyTimeout(Duration::from_secs(
                self.body_read_timeout_secs,
            )),
            approvals_snapshot: self.approvals_snapshot_max,
            max_queued_turns: self.max_queued_turns,
            auth_failures_per_minute: self.auth_failures_per_minute,
        })
    }

    /// The per-app caps these flags describe.
    pub fn quotas(&self) -> anyhow::Result<crate::store::Quotas> {
        for (flag, value) in [
            (
                "--max-open-sessions-per-app",
                self.max_open_sessions_per_app,
            ),
            (
                "--max-running-turns-per-app",
                self.max_running_turns_per_app,
            ),
        ] {
            anyhow::ensure!(
                value != Some(0),
                "{flag}: must be 1 or more (leave it out for no cap)"
            );
        }
        anyhow::ensure!(
            self.webhook_max_pending > 0,
            "--webhook-max-pending: must be 1 or more"
        );
        Ok(crate::store::Quotas {
            open_sessions: self.max_open_sessions_per_app,
            running_turns: self.max_running_turns_per_app,
            webhook_pending: Some(self.webhook_max_pending),
            journal_bytes: self.max_journal_bytes(),
            public_open_sessions: Some(self.invocation_max_open_sessions_per_app)
                .filter(|cap| *cap > 0),
            public_running_turns: Some(self.invocation_max_running_turns_per_app)
                .filter(|cap| *cap > 0),
            share_percent: Some(self.invocation_share_per_principal)
                .filter(|percent| (1..100).contains(percent)),
        })
    }

    /// `--max-session-journal-mb` in bytes; `None`: no cap.
    pub fn max_journal_bytes(&self) -> Option<u64> {
        (self.max_session_journal_mb > 0)
            .then(|| self.max_session_journal_mb.saturating_mul(1 << 20))
    }

    /// The webhook settings these flags describe.
    pub fn webhook_options(&self) -> crate::webhooks::WebhookOptions {
        crate::webhooks::WebhookOptions {
            allow_private: self.allow_private_webhooks,
            retry_base: self.webhook_retry_base.into(),
            public_url: self.public_url.clone(),
            link_ttl: self.decision_link_ttl.into(),
        }
    }

    /// The outbound policy these flags describe.
    pub fn outbound_policy(&self) -> anyhow::Result<crate::runtime::outbound::OutboundPolicy> {
        use crate::runtime::outbound::{OriginPattern, OutboundPolicy, origin};
        let mut ceiling = Vec::new();
        for entry in &self.outbound_allow {
            if entry.trim() == "*" {
                ceiling.extend(origin::unrestricted());
            } else {
                ceiling.push(
                    OriginPattern::parse(entry.trim())
                        .map_err(|e| anyhow::anyhow!("--outbound-allow: {e}"))?,
                );
            }
        }
        Ok(OutboundPolicy {
            ceiling,
            allow_private: self.outbound_allow_private,
        })
    }
}

#[derive(clap::Args)]
pub struct BuildArgs {
    /// The agent project: a directory with `agenthost.toml` and the agent's code.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Where to write the component (default: DIR/<agent.entry>, where
    /// `deploy --no-build` takes it).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct DeployArgs {
    /// The agent project: a directory with `agenthost.toml` and the agent's
    /// code (`Cargo.toml` for Rust, `app.py` for Python, `agent.ts` for
    /// TypeScript).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    #[command(flatten)]
    pub remote: Remote,
    /// Seconds the upload and the build may take together before giving up
    /// (the local build before the upload is not counted).
    #[arg(long, default_value_t = 600)]
    pub timeout_secs: u64,
    /// Do not build (cargo for Rust, componentize-py for Python, esbuild and
    /// componentize-js for TypeScript): package the directory as it is (the
    /// entry must exist).
    #[arg(long)]
    pub no_build: bool,
    /// The operator's approval policy for this deployment: a JSON array of
    /// tool names whose calls always wait for a human decision.
    #[arg(long, value_name = "JSON")]
    pub approval_policy: Option<String>,
    /// Retry until --timeout-secs when nothing listens at --url (a server
    /// still starting). Without it, a URL where nothing listens fails at
    /// once (exit 6): a typo is not a hang.
    #[arg(long)]
    pub wait_for_server: bool,
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, Command};

    fn quotas(args: &[&str]) -> crate::store::Quotas {
        let cli = Cli::try_parse_from([&["agenthost", "serve"], args].concat()).unwrap();
        let Command::Serve(serve) = cli.command else {
            panic!("serve");
        };
        serve.quotas().unwrap()
    }

    /// What ships in frontends is capped with no flag set; 0 lifts a cap.
    #[test]
    fn invocation_keys_and_journals_are_capped_by_default() {
        let defaults = quotas(&[]);
        assert_eq!(defaults.public_open_sessions, Some(10_000));
        assert_eq!(defaults.public_running_turns, Some(64));
        assert_eq!(defaults.journal_bytes, Some(1 << 30));
        assert_eq!(
            (defaults.open_sessions, defaults.running_turns),
            (None, None)
        );
        let lifted = quotas(&[
            "--invocation-max-open-sessions-per-app",
            "0",
            "--invocation-max-running-turns-per-app",
            "0",
            "--max-session-journal-mb",
            "0",
        ]);
        assert_eq!(defaults.share_percent, Some(1));
        assert_eq!(
            quotas(&["--invocation-share-per-principal", "0"]).share_percent,
            None
        );
        assert_eq!(lifted.public_open_sessions, None);
        assert_eq!(lifted.public_running_turns, None);
        assert_eq!(lifted.journal_bytes, None);
    }
}
