//! `agenthost bench`: drives a running server over real HTTP and SSE against
//! the `examples/bench` agent and reports latencies, throughput and the
//! server's own figures (docs/bench.md has every option and field).
//!
//! Phases, in this order, each skippable: `load` (`run.rs`: C workers create
//! sessions on `/stream` and send one follow-up turn each), `replay`
//! (`replay.rs`: one long session read from the start and from the middle),
//! `idle` (`idle.rs`: K open idle event streams and the server's RSS), and
//! `approval` (`approval.rs`: gated calls decided over HTTP). Around each
//! phase `metrics.rs` scrapes `GET /metrics` and `sys.rs` reads the bench's
//! own CPU time. Client-side latencies are exact percentiles of the recorded
//! samples (`stats.rs`); the server's histograms are bucket estimates.
//!
//! `--json` prints one object (`report.rs` defines it; times in ms unless
//! the name says otherwise, `null` for what was skipped or not measurable):
//!
//! ```text
//! {
//!   "url", "app",
//!   "config": {"concurrency", "duration_secs", "turns", "deltas",
//!              "replay_events", "idle_streams", "approvals"},
//!   "metrics_available": bool,            // false: GET /metrics answered 404
//!   "load": null | {
//!     "seconds", "sessions", "turns", "events", "turns_per_sec", "events_per_sec",
//!     "first_delta": Latency,             // POST /sessions → first MESSAGE_DELTA
//!     "turn": Latency,                    // POST /sessions → TURN_ENDED
//!     "followup_first_delta": Latency|null, // POST input → first MESSAGE_DELTA
//!     "resources": Resources },
//!   "replay": null | {
//!     "session_id", "events", "write_seconds", "write_events_per_sec",
//!     "write_resources": Resources,       // the turn writing the session
//!     "from_start": Read, "from_middle": Read,
//!     "resources": Resources },           // the two reads
//!   "idle": null | {
//!     "requested", "opened", "open_seconds", "error": string|null,
//!     "rss_before_bytes", "rss_after_bytes", "rss_per_stream_bytes",
//!     "server_streams_open",
//!     "resources": Resources },
//!   "approval": null | {
//!     "sessions", "to_turn_started": Latency, "to_tool_result": Latency,
//!     "to_turn_ended": Latency, "resources": Resources }
//! }
//! Latency   = {"count", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"}
//! Read      = {"events", "seconds", "first_event_ms", "events_per_sec"}
//! Resources = {"seconds",
//!              "client": {"cpu_seconds", "cpu_percent"},
//!              "server": {"cpu_seconds", "cpu_percent", "rss_bytes", "journal_events",
//!                         "instantiate": Histogram, "journal_commit": Histogram,
//!                         "commit_batch": Histogram}}
//! Histogram = null | {"count", "mean", "p50", "p99"}  // ms; commands for commit_batch
//! ```

mod approval;
mod client;
mod idle;
mod metrics;
mod replay;
mod report;
mod run;
mod sse;
mod stats;
mod sys;
mod wire;

use std::time::Duration;

use anyhow::{Context, bail};

use client::Api;
use report::{Config, Report};
use wire::AppView;

/// What to run (`agenthost bench`'s options, host/src/cli/bench.rs; every
/// one is in docs/bench.md).
pub struct Options {
    /// The server's base URL.
    pub url: String,
    pub api_key: String,
    /// The app (slug or id) running the `examples/bench` agent.
    pub app: String,
    /// Load phase: sessions driven at once (also the approval phase's).
    pub concurrency: u64,
    /// Load phase: how long to start new turns; zero skips it.
    pub duration: Duration,
    /// Load phase: run exactly this many turns instead of `duration`; 0 skips it.
    pub turns: Option<u64>,
    /// Load phase: deltas each turn streams.
    pub deltas: u64,
    /// Replay phase: deltas of the long session read back; 0 skips it.
    pub replay_events: u64,
    /// Idle phase: event streams held open on a finished turn; 0 skips it.
    pub idle_streams: u64,
    /// Approval phase: gated calls to decide; 0 skips it.
    pub approvals: u64,
    /// Print one JSON object instead of the table.
    pub json: bool,
}

/// Runs the phases the options ask for and prints the report.
///
/// The bench runs on one thread of its own (a current-thread runtime): an
/// event stream's chunks then wake their reader without crossing threads,
/// which on a multi-threaded runtime costs more than reading the event
/// (the replay read ran 5 times slower). Its CPU is therefore at most one
/// core: near 100%, the bench is the bottleneck. The idle phase holds
/// many streams open: the caller raises the open-file limit first.
pub async fn bench(args: Options) -> anyhow::Result<()> {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("bench".into())
        .spawn(move || {
            let ran = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the bench's runtime")
                .and_then(|runtime| runtime.block_on(run(args)));
            let _ = done.send(ran);
        })
        .context("cannot start the bench's thread")?;
    result.await.context("the bench's thread panicked")?
}

async fn run(args: Options) -> anyhow::Result<()> {
    let api = Api::new(&args.url, &args.api_key)?;
    check_app(&api, &args.app).await?;
    let metrics_available = api.metrics().await?.is_some();
    if !metrics_available {
        progress("GET /metrics answered 404: the server's figures are reported as null");
    }
    let load_turns = match args.turns {
        Some(turns) => (turns > 0).then_some(run::Stop::Turns(turns)),
        None => (!args.duration.is_zero()).then_some(run::Stop::Duration(args.duration)),
    };
    let mut report = Report {
        url: api.base().to_string(),
        app: args.app.clone(),
        config: Config {
            concurrency: args.concurrency,
            duration_secs: args.turns.is_none().then_some(args.duration.as_secs_f64()),
            turns: args.turns,
            deltas: args.deltas,
            replay_events: args.replay_events,
            idle_streams: args.idle_streams,
            approvals: args.approvals,
        },
        metrics_available,
        load: None,
        replay: None,
        idle: None,
        approval: None,
    };
    if let Some(stop) = load_turns {
        progress(&format!(
            "load: {} at concurrency {}, {} deltas per turn",
            stop, args.concurrency, args.deltas
        ));
        report.load = Some(run::load(&api, &args.app, args.concurrency, stop, args.deltas).await?);
    }
    if args.replay_events > 0 {
        progress(&format!(
            "replay: writing and reading {} deltas",
            args.replay_events
        ));
        report.replay = Some(replay::replay(&api, &args.app, args.replay_events).await?);
    }
    if args.idle_streams > 0 {
        progress(&format!(
            "idle: opening {} event streams",
            args.idle_streams
        ));
        report.idle = Some(idle::idle(&api, &args.app, args.idle_streams).await?);
    }
    if args.approvals > 0 {
        progress(&format!(
            "approval: {} gated calls at concurrency {}",
            args.approvals, args.concurrency
        ));
        report.approval =
            Some(approval::approvals(&api, &args.app, args.approvals, args.concurrency).await?);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report::table(&report));
    }
    Ok(())
}

/// The app must exist and serve the bench agent's routes.
async fn check_app(api: &Api, app: &str) -> anyhow::Result<()> {
    let view: AppView = api.get(&format!("/apps/{app}")).await.map_err(|e| {
        anyhow::anyhow!("{e:#}\n(deploy the bench agent first: agenthost deploy examples/bench)")
    })?;
    let routes: Vec<&str> = view.routes.iter().map(String::as_str).collect();
    for route in ["/stream", "/approve"] {
        if !routes.contains(&route) {
            bail!(
                "app `{app}` does not serve {route} (its routes: {routes:?}): deploy examples/bench as it"
            );
        }
    }
    Ok(())
}

/// A line on stderr saying what runs now (stdout keeps the report).
fn progress(line: &str) {
    eprintln!("bench: {line}");
}
