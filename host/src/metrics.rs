//! The host-side figures a client cannot see, for `GET /metrics` (OpenMetrics
//! text): instantiate time, turn time, journal commit latency and batch size,
//! events committed, running turns, open streams and their catch-ups from
//! redb, requests refused by the per-key rate limit and the per-app caps,
//! the store engine the server runs on, and the process's own CPU time and
//! resident memory. One process-wide set, recorded without locks.
//! Names and meanings are documented in docs/metrics.md.

use std::sync::OnceLock;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

pub(crate) struct Metrics {
    pub instantiate: Histogram,
    pub turn: Histogram,
    pub commit: Histogram,
    pub commit_batch: Histogram,
    pub events: Counter,
    pub turns_running: Gauge,
    pub streams_open: Gauge,
    pub stream_catch_ups: Counter,
    /// Requests refused by the per-key rate limit (429 `rate_limited`).
    pub rate_limited: Counter,
    /// Requests refused by a per-app cap (429 `quota_exceeded`), by cap.
    pub quota_refused: Family<[(&'static str, &'static str); 1], Counter>,
    /// Stream opens refused by the per-key or per-end-user cap (429 `too_many_streams`).
    pub streams_refused: Counter,
    /// Reads of the store `GET /readyz` made (its answer is cached).
    pub ready_probes: Counter,
    /// Webhook delivery attempts, by outcome (`delivered`, `failed`, `refused`, `gone`).
    pub webhook_attempts: Family<[(&'static str, &'static str); 1], Counter>,
    /// Webhook events not recorded for an endpoint at its pending cap, by event type.
    pub webhook_dropped: Family<[(&'static str, &'static str); 1], Counter>,
    /// Schedules this host fired (a turn started or an input queued).
    pub schedules_fired: Counter,
    /// From a schedule's due time to the commit of its firing.
    pub schedule_lateness: Histogram,
    /// Due schedules left due because a cap (the app's running turns, the
    /// session's queue) refused them; retried at the next read.
    pub schedules_deferred: Counter,
    /// App schedules whose firing the app could not take (no active
    /// deployment, the route gone).
    pub schedules_missed: Counter,
    /// Tokens of declared-model completions, by app, alias and kind (`input`, `output`).
    pub llm_tokens: Family<Vec<(&'static str, String)>, Counter>,
    /// Declared-model calls refused at an LLM budget, by app and scope.
    pub llm_budget_reached: Family<Vec<(&'static str, String)>, Counter>,
    registry: Registry,
}

/// Seconds from 1 µs to 100 s, six buckets a decade (1, 1.5, 2, 3, 5, 7):
/// fine enough to read a p50 of a few microseconds and of a few seconds.
fn latency_buckets() -> Vec<f64> {
    let mut out = Vec::new();
    let mut decade = 1e-6;
    while decade < 100.0 {
        for step in [1.0, 1.5, 2.0, 3.0, 5.0, 7.0] {
            out.push(decade * step);
        }
        decade *= 10.0;
    }
    out.push(100.0);
    out
}

/// Commands per transaction: 1, 2, 4, … 1024 (the writer's batch cap).
fn batch_buckets() -> Vec<f64> {
    (0..=10).map(|i| f64::from(1u32 << i)).collect()
}

/// The process's metrics.
pub(crate) fn get() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let metrics = Metrics {
            instantiate: Histogram::new(latency_buckets()),
            turn: Histogram::new(latency_buckets()),
            commit: Histogram::new(latency_buckets()),
            commit_batch: Histogram::new(batch_buckets()),
            events: Counter::default(),
            turns_running: Gauge::default(),
            streams_open: Gauge::default(),
            stream_catch_ups: Counter::default(),
            rate_limited: Counter::default(),
            quota_refused: Family::default(),
            streams_refused: Counter::default(),
            ready_probes: Counter::default(),
            webhook_attempts: Family::default(),
            webhook_dropped: Family::default(),
            schedules_fired: Counter::default(),
            schedule_lateness: Histogram::new(latency_buckets()),
            schedules_deferred: Counter::default(),
            schedules_missed: Counter::default(),
            llm_tokens: Family::default(),
            llm_budget_reached: Family::default(),
            registry: Registry::default(),
        };
        let mut registry = Registry::default();
        registry.register(
            "agenthost_turn_instantiate_seconds",
            "Time to instantiate a turn's fresh component instance from its InstancePre",
            metrics.instantiate.clone(),
        );
        registry.register(
            "agenthost_turn_seconds",
            "Time from a turn's start on the host to its final commit",
            metrics.turn.clone(),
        );
        registry.register(
            "agenthost_journal_commit_seconds",
            "Time of one durable redb commit (fsync included)",
            metrics.commit.clone(),
        );
        registry.register(
            "agenthost_journal_commit_batch_size",
            "Writer commands (appends, turn ends, ...) per redb transaction",
            metrics.commit_batch.clone(),
        );
        registry.register(
            "agenthost_journal_events",
            "Events committed to session journals",
            metrics.events.clone(),
        );
        registry.register(
            "agenthost_turns_running",
            "Turns scheduled and not yet finished (running or waiting for a slot)",
            metrics.turns_running.clone(),
        );
        registry.register(
            "agenthost_sse_streams_open",
            "Open event streams",
            metrics.streams_open.clone(),
        );
        registry.register(
            "agenthost_sse_catch_ups",
            "Times an event stream fell behind the live feed and re-read the journal",
            metrics.stream_catch_ups.clone(),
        );
        registry.register(
            "agenthost_rate_limited",
            "Requests refused by the per-key rate limit (429 rate_limited)",
            metrics.rate_limited.clone(),
        );
        registry.register(
            "agenthost_quota_refusals",
            "Requests refused by a per-app cap (429 quota_exceeded), by cap",
            metrics.quota_refused.clone(),
        );
        registry.register(
            "agenthost_streams_refused",
            "Event stream opens refused by the cap per key or per end user (429 too_many_streams)",
            metrics.streams_refused.clone(),
        );
        registry.register(
            "agenthost_ready_probes",
            "Reads of the store made by GET /readyz (its answer is reused for 1 s)",
            metrics.ready_probes.clone(),
        );
        registry.register(
            "agenthost_webhook_attempts",
            "Webhook delivery attempts, by outcome (delivered, failed, refused, gone)",
            metrics.webhook_attempts.clone(),
        );
        registry.register(
            "agenthost_webhook_dropped",
            "Webhook events not recorded for an endpoint that had too many pending deliveries, by event type",
            metrics.webhook_dropped.clone(),
        );
        registry.register(
            "agenthost_schedules_fired",
            "Schedules this host fired (docs/schedules.md): a turn started or an input queued",
            metrics.schedules_fired.clone(),
        );
        registry.register(
            "agenthost_schedule_lateness_seconds",
            "Time from a schedule's due time to the commit of its firing",
            metrics.schedule_lateness.clone(),
        );
        registry.register(
            "agenthost_schedules_deferred",
            "Firings of due schedules put off by a cap (running turns, a full queue); tried again at the next read",
            metrics.schedules_deferred.clone(),
        );
        registry.register(
            "agenthost_schedules_missed",
            "Firings of app schedules the app could not take (no active deployment, the route gone)",
            metrics.schedules_missed.clone(),
        );
        registry.register(
            "agenthost_llm_tokens",
            "Tokens of declared-model completions as the providers counted them, by app, alias and kind (input, output)",
            metrics.llm_tokens.clone(),
        );
        registry.register(
            "agenthost_llm_budget_reached",
            "Declared-model calls refused at an LLM budget (BUDGET_REACHED), by app and scope",
            metrics.llm_budget_reached.clone(),
        );
        registry.register_collector(Box::new(ProcessCollector));
        Metrics {
            registry,
            ..metrics
        }
    })
}

impl Metrics {
    /// Counts a refusal by the per-app cap `cap` (`open_sessions`, `running_turns`).
    pub(crate) fn quota_refusal(&self, cap: &'static str) {
        self.quota_refused.get_or_create(&[("cap", cap)]).inc();
    }

    /// The OpenMetrics text of every metric.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::with_capacity(16 << 10);
        if let Err(err) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %err, "cannot encode metrics");
        }
        out
    }
}

/// The store engine this process runs on (`redb` or `postgres`), set once
/// the store is open; `agenthost_store_info{engine="…"}` names it.
static STORE_ENGINE: OnceLock<&'static str> = OnceLock::new();

/// Records the store engine the server opened (the first call wins: one
/// server per process).
pub(crate) fn set_store_engine(engine: &'static str) {
    let _ = STORE_ENGINE.set(engine);
}

/// Counts an open event stream while it lives.
pub(crate) struct StreamGuard(());

impl Default for StreamGuard {
    fn default() -> StreamGuard {
        get().streams_open.inc();
        StreamGuard(())
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        get().streams_open.dec();
    }
}

/// `agenthost_store_info` (once the store is open), and
/// `process_cpu_seconds_total` and `process_resident_memory_bytes`, read
/// from /proc at each scrape (absent where /proc is not Linux's).
#[derive(Debug)]
struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(engine) = STORE_ENGINE.get() {
            let info = Info::new([("engine", *engine)]);
            let metric = encoder.encode_descriptor(
                "agenthost_store",
                "The store engine the server runs on",
                None,
                info.metric_type(),
            )?;
            info.encode(metric)?;
        }
        if let Some(cpu) = cpu_seconds() {
            let counter = ConstCounter::new(cpu);
            let metric = encoder.encode_descriptor(
                "process_cpu_seconds",
                "User and system CPU time of the server process",
                None,
                counter.metric_type(),
            )?;
            counter.encode(metric)?;
        }
        if let Some(rss) = resident_bytes() {
            let gauge = ConstGauge::new(rss);
            let metric = encoder.encode_descriptor(
                "process_resident_memory_bytes",
                "Resident memory of the server process",
                None,
                gauge.metric_type(),
            )?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / clock_ticks())
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

fn resident_bytes() -> Option<i64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes_every_family() {
        let m = super::get();
        m.instantiate.observe(12e-6);
        m.commit_batch.observe(3.0);
        m.quota_refusal("running_turns");
        super::set_store_engine("redb");
        let text = m.encode();
        for name in [
            "agenthost_turn_instantiate_seconds_bucket",
            "agenthost_journal_commit_seconds_count",
            "agenthost_journal_commit_batch_size_sum",
            "agenthost_journal_events_total",
            "agenthost_sse_streams_open",
            "agenthost_rate_limited_total",
            "agenthost_streams_refused_total",
            "agenthost_quota_refusals_total{cap=\"running_turns\"}",
            // Whichever engine a server of this process opened first.
            "agenthost_store_info{engine=\"",
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }
}
