//! `agenthost bench`'s options; the client itself is the `agenthost-bench`
//! crate (crates/bench), outside the server's library.

use std::time::Duration;

use super::Remote;

/// The most deltas one `/stream` turn of the bench agent streams.
const MAX_DELTAS: u64 = 999_000;

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub(crate) remote: Remote,
    /// The app (slug or id) running the `examples/bench` agent.
    #[arg(long, default_value = "bench")]
    pub(crate) app: String,
    /// Load phase: sessions driven at once (also the approval phase's).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub(crate) concurrency: u64,
    /// Load phase: how long to start new turns (e.g. `10s`, `1m`); `0s` skips it.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub(crate) duration: Duration,
    /// Load phase: run exactly this many turns instead of `--duration`; 0 skips it.
    #[arg(long, conflicts_with = "duration")]
    pub(crate) turns: Option<u64>,
    /// Load phase: deltas each turn streams.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=MAX_DELTAS))]
    pub(crate) deltas: u64,
    /// Replay phase: deltas of the long session read back; 0 skips it.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(0..=MAX_DELTAS))]
    pub(crate) replay_events: u64,
    /// Idle phase: event streams held open on a finished turn; 0 skips it.
    #[arg(long, default_value_t = 1000)]
    pub(crate) idle_streams: u64,
    /// Approval phase: gated calls to decide; 0 skips it.
    #[arg(long, default_value_t = 200)]
    pub(crate) approvals: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Runs the bench (`agenthost_bench::bench`) with these options.
pub async fn bench(args: BenchArgs) -> anyhow::Result<()> {
    // The idle phase holds many event streams open.
    crate::util::raise_open_file_limit();
    agenthost_bench::bench(agenthost_bench::Options {
        url: args.remote.url,
        api_key: args.remote.api_key,
        app: args.app,
        concurrency: args.concurrency,
        duration: args.duration,
        turns: args.turns,
        deltas: args.deltas,
        replay_events: args.replay_events,
        idle_streams: args.idle_streams,
        approvals: args.approvals,
        json: args.json,
    })
    .await
}
