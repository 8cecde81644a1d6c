//! The server's figures: scrapes of `GET /metrics` (Prometheus text) before
//! and after a phase, turned into CPU, RSS and histogram deltas, next to the
//! bench's own CPU time over the same interval.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use super::client::Api;
use super::sys;

/// One scrape: every sample, summed over labels other than `le`.
#[derive(Default, Debug)]
pub(super) struct Snapshot {
    /// `name` → value, for samples without `le`.
    values: BTreeMap<String, f64>,
    /// `name` (of the `_bucket` series, without the suffix) → `le` → cumulative count.
    buckets: BTreeMap<String, Vec<(f64, f64)>>,
}

impl Snapshot {
    /// Parses the text format; lines it cannot read are skipped.
    pub(super) fn parse(text: &str) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            // `name{labels} value [timestamp]` or `name value [timestamp]`.
            let (series, rest) = match line.find('}') {
                Some(end) if line[..end].contains('{') => (&line[..=end], &line[end + 1..]),
                _ => match line.split_once(char::is_whitespace) {
                    Some(split) => split,
                    None => continue,
                },
            };
            let Some(value) = rest.split_whitespace().next() else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => (name, labels.trim_end_matches('}')),
                None => (series, ""),
            };
            let le = labels.split(',').find_map(|pair| {
                let (key, value) = pair.split_once('=')?;
                (key.trim() == "le").then(|| value.trim().trim_matches('"').to_string())
            });
            match (name.strip_suffix("_bucket"), le) {
                (Some(base), Some(le)) => {
                    let Ok(le) = le.parse::<f64>() else { continue };
                    let buckets = snapshot.buckets.entry(base.to_string()).or_default();
                    match buckets.iter_mut().find(|(bound, _)| *bound == le) {
                        Some((_, count)) => *count += value,
                        None => buckets.push((le, value)),
                    }
                }
                _ => *snapshot.values.entry(name.to_string()).or_default() += value,
            }
        }
        for buckets in snapshot.buckets.values_mut() {
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        snapshot
    }

    pub(super) fn value(&self, name: &str) -> Option<f64> {
        self.values.get(name).copied()
    }

    /// A value that counts something (bytes, events, streams), as an integer.
    pub(super) fn count(&self, name: &str) -> Option<u64> {
        self.value(name).map(whole)
    }
}

/// A non-negative float as the integer it stands for.
fn whole(value: f64) -> u64 {
    value.max(0.0).round() as u64
}

/// A histogram's change between two scrapes, scaled by `unit` (1000 for
/// seconds shown as ms). Quantiles are estimated from the buckets.
#[derive(Serialize, Debug, PartialEq)]
pub(super) struct Histogram {
    pub count: u64,
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

impl Histogram {
    fn between(before: &Snapshot, after: &Snapshot, name: &str, unit: f64) -> Option<Histogram> {
        let count = after.value(&format!("{name}_count"))?
            - before.value(&format!("{name}_count")).unwrap_or(0.0);
        let sum = after.value(&format!("{name}_sum"))?
            - before.value(&format!("{name}_sum")).unwrap_or(0.0);
        let empty = Vec::new();
        let old = before.buckets.get(name).unwrap_or(&empty);
        let buckets: Vec<(f64, f64)> = (after.buckets.get(name)?.iter())
            .map(|&(le, n)| {
                let was = old.iter().find(|(b, _)| *b == le).map_or(0.0, |x| x.1);
                (le, n - was)
            })
            .collect();
        let has = count > 0.0;
        Some(Histogram {
            count: count.max(0.0) as u64,
            mean: has.then(|| sum / count * unit),
            p50: quantile(&buckets, 0.50).map(|v| v * unit),
            p99: quantile(&buckets, 0.99).map(|v| v * unit),
        })
    }
}

/// Like Prometheus' `histogram_quantile`: linear interpolation inside the
/// bucket that holds the rank. The first bucket, whose lower bound is
/// unknown, answers its upper bound (a batch size is never below 1); the
/// `+Inf` bucket answers its lower bound.
fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for (i, &(le, cumulative)) in buckets.iter().enumerate() {
        if cumulative >= rank {
            if le.is_infinite() {
                return Some(lower.0);
            }
            if i == 0 {
                return Some(le);
            }
            let in_bucket = cumulative - lower.1;
            let fraction = if in_bucket > 0.0 {
                (rank - lower.1) / in_bucket
            } else {
                1.0
            };
            return Some(lower.0 + (le - lower.0) * fraction);
        }
        lower = (le, cumulative);
    }
    Some(lower.0)
}

/// What a phase cost: wall time, the bench's CPU and the server's figures.
#[derive(Serialize, Debug)]
pub(super) struct Resources {
    pub seconds: f64,
    pub client: Cpu,
    pub server: Server,
}

#[derive(Serialize, Debug)]
pub(super) struct Cpu {
    pub cpu_seconds: Option<f64>,
    pub cpu_percent: Option<f64>,
}

/// The server's side of a phase; every field is `null` without `/metrics`.
#[derive(Serialize, Debug, Default)]
pub(super) struct Server {
    pub cpu_seconds: Option<f64>,
    pub cpu_percent: Option<f64>,
    /// `process_resident_memory_bytes` at the end of the phase.
    pub rss_bytes: Option<u64>,
    /// Events journaled during the phase.
    pub journal_events: Option<u64>,
    /// `agenthost_turn_instantiate_seconds`, in ms.
    pub instantiate: Option<Histogram>,
    /// `agenthost_journal_commit_seconds`, in ms.
    pub journal_commit: Option<Histogram>,
    /// `agenthost_journal_commit_batch_size`, commands per transaction.
    pub commit_batch: Option<Histogram>,
}

/// Taken when a phase starts; `finish` measures what happened since.
pub(super) struct Probe {
    started: Instant,
    client_cpu: Option<f64>,
    server: Option<Snapshot>,
}

impl Probe {
    pub(super) async fn start(api: &Api) -> anyhow::Result<Probe> {
        let server = api.metrics().await?;
        Ok(Probe {
            started: Instant::now(),
            client_cpu: sys::cpu_seconds(),
            server,
        })
    }

    pub(super) async fn finish(self, api: &Api) -> anyhow::Result<Resources> {
        let seconds = self.started.elapsed().as_secs_f64();
        let client_cpu = sys::cpu_seconds().zip(self.client_cpu).map(|(b, a)| b - a);
        let after = api.metrics().await?;
        let percent = |cpu: Option<f64>| cpu.filter(|_| seconds > 0.0).map(|c| c / seconds * 100.0);
        let server = match (&self.server, &after) {
            (Some(before), Some(after)) => {
                let delta =
                    |name: &str| Some(after.value(name)? - before.value(name).unwrap_or(0.0));
                let cpu = delta("process_cpu_seconds_total");
                Server {
                    cpu_seconds: cpu,
                    cpu_percent: percent(cpu),
                    rss_bytes: after.count("process_resident_memory_bytes"),
                    journal_events: delta("agenthost_journal_events_total").map(whole),
                    instantiate: Histogram::between(
                        before,
                        after,
                        "agenthost_turn_instantiate_seconds",
                        1000.0,
                    ),
                    journal_commit: Histogram::between(
                        before,
                        after,
                        "agenthost_journal_commit_seconds",
                        1000.0,
                    ),
                    commit_batch: Histogram::between(
                        before,
                        after,
                        "agenthost_journal_commit_batch_size",
                        1.0,
                    ),
                }
            }
            _ => Server::default(),
        };
        Ok(Resources {
            seconds,
            client: Cpu {
                cpu_seconds: client_cpu,
                cpu_percent: percent(client_cpu),
            },
            server,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "# HELP x\n# TYPE agenthost_journal_commit_seconds histogram\n\
agenthost_journal_commit_seconds_bucket{le=\"0.001\"} 10\n\
agenthost_journal_commit_seconds_bucket{le=\"0.01\"} 10\n\
agenthost_journal_commit_seconds_bucket{le=\"+Inf\"} 10\n\
agenthost_journal_commit_seconds_sum 0.005\n\
agenthost_journal_commit_seconds_count 10\n\
process_cpu_seconds_total 1.5\n";

    const AFTER: &str = "agenthost_journal_commit_seconds_bucket{le=\"0.001\"} 10\n\
agenthost_journal_commit_seconds_bucket{le=\"0.01\"} 110\n\
agenthost_journal_commit_seconds_bucket{le=\"+Inf\"} 110\n\
agenthost_journal_commit_seconds_sum 0.505\n\
agenthost_journal_commit_seconds_count 110\n\
process_cpu_seconds_total 2.5 1700000000000\n\
process_resident_memory_bytes 1.2e7\n";

    #[test]
    fn parses_and_diffs_histograms() {
        let (before, after) = (Snapshot::parse(BEFORE), Snapshot::parse(AFTER));
        assert_eq!(after.value("process_cpu_seconds_total"), Some(2.5));
        assert_eq!(after.value("process_resident_memory_bytes"), Some(1.2e7));
        let h = Histogram::between(&before, &after, "agenthost_journal_commit_seconds", 1000.0)
            .unwrap();
        assert_eq!(h.count, 100);
        assert!((h.mean.unwrap() - 5.0).abs() < 1e-9);
        // All 100 new samples are in (1 ms, 10 ms]: the median interpolates to 5.5 ms.
        assert!((h.p50.unwrap() - 5.5).abs() < 1e-9, "{h:?}");
        assert!(Histogram::between(&before, &after, "absent", 1.0).is_none());
    }

    #[test]
    fn quantile_in_the_inf_bucket_is_its_lower_bound() {
        assert_eq!(
            quantile(&[(1.0, 0.0), (f64::INFINITY, 5.0)], 0.5),
            Some(1.0)
        );
        assert_eq!(quantile(&[(1.0, 0.0), (f64::INFINITY, 0.0)], 0.5), None);
        assert_eq!(quantile(&[(1.0, 3.0), (2.0, 4.0)], 0.5), Some(1.0));
    }
}
