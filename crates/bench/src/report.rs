//! The bench's result: the JSON object (`--json`) and the table for people,
//! one line per figure.

use std::fmt::Write;

use serde::Serialize;

use super::approval::Approval;
use super::idle::Idle;
use super::metrics::{Histogram, Resources};
use super::replay::{Read, Replay};
use super::run::Load;
use super::stats::Latency;

#[derive(Serialize)]
pub(super) struct Report {
    pub url: String,
    pub app: String,
    pub config: Config,
    /// `false`: `GET /metrics` answered 404, so every server figure is `null`.
    pub metrics_available: bool,
    pub load: Option<Load>,
    pub replay: Option<Replay>,
    pub idle: Option<Idle>,
    pub approval: Option<Approval>,
}

#[derive(Serialize)]
pub(super) struct Config {
    pub concurrency: u64,
    /// `null` when `--turns` was given.
    pub duration_secs: Option<f64>,
    pub turns: Option<u64>,
    pub deltas: u64,
    pub replay_events: u64,
    pub idle_streams: u64,
    pub approvals: u64,
}

/// The report as aligned `figure  value` lines, a block per phase.
pub(super) fn table(report: &Report) -> String {
    let mut t = Table::default();
    let c = &report.config;
    t.line("server", &report.url);
    t.line("app", &report.app);
    if !report.metrics_available {
        t.line("server metrics", "unavailable (GET /metrics answered 404)");
    }
    if let Some(load) = &report.load {
        t.heading(&format!(
            "load (concurrency {}, {} deltas per turn)",
            c.concurrency, c.deltas
        ));
        t.line("duration", &format!("{:.2} s", load.seconds));
        t.line(
            "sessions / turns / events",
            &format!("{} / {} / {}", load.sessions, load.turns, load.events),
        );
        t.line("turns/s", &format!("{:.1}", load.turns_per_sec));
        t.line("events/s", &format!("{:.0}", load.events_per_sec));
        t.latency("POST /sessions → first delta", &load.first_delta);
        t.latency("POST /sessions → TURN_ENDED", &load.turn);
        t.latency("POST input → first delta", &load.followup_first_delta);
        t.resources(&load.resources);
    }
    if let Some(replay) = &report.replay {
        t.heading(&format!("replay ({} events)", replay.events));
        t.line(
            "write (turn streaming)",
            &format!(
                "{:.2} s, {:.0} events/s",
                replay.write_seconds, replay.write_events_per_sec
            ),
        );
        t.resources(&replay.write_resources);
        t.read("read from seq 0", &replay.from_start);
        t.read("read from the middle", &replay.from_middle);
        t.resources(&replay.resources);
    }
    if let Some(idle) = &report.idle {
        t.heading("idle streams");
        t.line(
            "open streams",
            &format!(
                "{} of {} in {:.2} s",
                idle.opened, idle.requested, idle.open_seconds
            ),
        );
        if let Some(error) = &idle.error {
            t.line("stopped opening", error);
        }
        t.line("server RSS before", &mib(idle.rss_before_bytes));
        t.line("server RSS after", &mib(idle.rss_after_bytes));
        t.line(
            "server RSS per stream",
            &idle
                .rss_per_stream_bytes
                .map_or("-".into(), |b| format!("{:.1} KiB", b / 1024.0)),
        );
        if let Some(open) = idle.server_streams_open {
            t.line("server's open streams", &format!("{open}"));
        }
        t.resources(&idle.resources);
    }
    if let Some(approval) = &report.approval {
        t.heading(&format!("approvals ({} sessions)", approval.sessions));
        t.latency("POST approval → TURN_STARTED", &approval.to_turn_started);
        t.latency("POST approval → TOOL_RESULT", &approval.to_tool_result);
        t.latency("POST approval → TURN_ENDED", &approval.to_turn_ended);
        t.resources(&approval.resources);
    }
    t.text
}

#[derive(Default)]
struct Table {
    text: String,
}

impl Table {
    fn heading(&mut self, title: &str) {
        let _ = writeln!(self.text, "\n{title}");
    }

    fn line(&mut self, figure: &str, value: &str) {
        let _ = writeln!(self.text, "  {figure:<34} {value}");
    }

    fn latency(&mut self, figure: &str, latency: &Option<Latency>) {
        let value = match latency {
            Some(l) => format!(
                "p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}  mean {:.2} ms  (n={})",
                l.p50_ms, l.p90_ms, l.p99_ms, l.max_ms, l.mean_ms, l.count
            ),
            None => "-".into(),
        };
        self.line(figure, &value);
    }

    fn read(&mut self, figure: &str, read: &Read) {
        let value = format!(
            "{} events in {:.3} s: {:.0} events/s (first after {:.2} ms)",
            read.events, read.seconds, read.events_per_sec, read.first_event_ms
        );
        self.line(figure, &value);
    }

    fn resources(&mut self, r: &Resources) {
        let cpu = |seconds: Option<f64>, percent: Option<f64>| match (seconds, percent) {
            (Some(s), Some(p)) => format!("{s:.2} s ({p:.0}%)"),
            _ => "-".into(),
        };
        let server = &r.server;
        self.line(
            "  CPU server / bench",
            &format!(
                "{} / {}",
                cpu(server.cpu_seconds, server.cpu_percent),
                cpu(r.client.cpu_seconds, r.client.cpu_percent)
            ),
        );
        if server.instantiate.is_none()
            && server.journal_commit.is_none()
            && server.commit_batch.is_none()
        {
            return; // no /metrics, or none of these series: nothing to show
        }
        self.line(
            "  instantiate (server)",
            &histogram(&server.instantiate, " ms"),
        );
        self.line(
            "  journal commit (server)",
            &histogram(&server.journal_commit, " ms"),
        );
        self.line(
            "  commit batch (server)",
            &histogram(&server.commit_batch, ""),
        );
    }
}

fn histogram(h: &Option<Histogram>, unit: &str) -> String {
    let number = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    match h {
        Some(h) if h.count > 0 => format!(
            "mean {}  ~p50 {}  ~p99 {}{unit}  (n={})",
            number(h.mean),
            number(h.p50),
            number(h.p99),
            h.count
        ),
        Some(_) => "none".into(),
        None => "-".into(),
    }
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or("-".into(), |b| format!("{:.1} MiB", b as f64 / 1048576.0))
}
