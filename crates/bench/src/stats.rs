//! Latency summaries: exact percentiles of recorded samples (nearest rank
//! on the sorted samples, so p50 <= p90 <= p99 <= max always holds).

use std::time::Duration;

use serde::Serialize;

/// A summary of latency samples, in milliseconds.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub(super) struct Latency {
    pub count: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    /// The summary of `samples`, or `None` if there are none.
    pub(super) fn of(samples: &[Duration]) -> Option<Latency> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let total: Duration = sorted.iter().sum();
        Some(Latency {
            count: sorted.len(),
            mean_ms: ms(total) / sorted.len() as f64,
            p50_ms: ms(percentile(&sorted, 0.50)),
            p90_ms: ms(percentile(&sorted, 0.90)),
            p99_ms: ms(percentile(&sorted, 0.99)),
            max_ms: ms(sorted[sorted.len() - 1]),
        })
    }
}

/// The nearest-rank percentile `q` (0 < q <= 1) of non-empty sorted samples:
/// the smallest sample with at least `q` of all samples at or below it.
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `count / seconds`, or 0 for an empty interval.
pub(super) fn rate(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(values: &[u64]) -> Vec<Duration> {
        values.iter().map(|&v| Duration::from_millis(v)).collect()
    }

    #[test]
    fn nearest_rank_percentiles() {
        let samples = ms(&(1..=100).rev().collect::<Vec<_>>());
        let summary = Latency::of(&samples).unwrap();
        assert_eq!(summary.count, 100);
        assert_eq!(summary.p50_ms, 50.0);
        assert_eq!(summary.p90_ms, 90.0);
        assert_eq!(summary.p99_ms, 99.0);
        assert_eq!(summary.max_ms, 100.0);
        assert_eq!(summary.mean_ms, 50.5);
    }

    #[test]
    fn one_sample_and_none() {
        let summary = Latency::of(&ms(&[7])).unwrap();
        assert_eq!(
            (summary.p50_ms, summary.p99_ms, summary.max_ms),
            (7.0, 7.0, 7.0)
        );
        assert_eq!(Latency::of(&[]), None);
    }
}
