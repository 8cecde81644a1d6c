//! Per-turn limits: safe defaults, the manifest's `[limits]` (within the
//! server's maxima), and the fixed bounds on what one call may carry.
//! Documented in docs/limits.md.

use std::time::Duration;

use crate::store::LimitsRecord;

/// What one turn may use.
#[derive(Debug, Clone)]
pub(crate) struct TurnLimits {
    /// Wall clock over the whole turn, host I/O (and waiting on a model) included.
    pub deadline: Duration,
    /// CPU, as wasm fuel (about one unit per instruction): independent of machine load.
    pub fuel: u64,
    /// Bytes of each linear memory.
    pub memory_bytes: usize,
    /// Events one turn may journal.
    pub max_events: u64,
    /// Messages one turn may have open at once.
    pub max_open_messages: usize,
    /// Bytes (the JSON payloads) of the events one turn writes through its
    /// outbox: its own and its outbound records.
    pub max_output_bytes: u64,
    /// Bytes of one message's text.
    pub max_message_bytes: usize,
    /// Bytes of one JSON payload (tool arguments, tool output, a step's reason).
    pub max_payload_bytes: usize,
    /// Events in one `read-history` page.
    pub max_history_page: usize,
    /// How long an approval may wait before it is denied by `timeout`:
    /// the manifest's, else the operator's default; `None` waits forever.
    pub approval_timeout: Option<Duration>,
    /// Bytes the turn may add to its session's journal before the
    /// session's cap (`--max-session-journal-mb`, `journal_cap`): the cap
    /// less what the journal held when the turn started.
    pub journal_room: u64,
    /// That cap, for the message; `None`: no cap.
    pub journal_cap: Option<u64>,
    /// The soonest a timer the agent sets may be due (`--min-timer-delay`).
    pub min_timer_delay: Duration,
}

/// A limit the manifest may set: its default and the server's maximum.
pub(crate) struct Bound {
    pub key: &'static str,
    pub default: u64,
    pub max: u64,
}

pub(crate) const WALL_CLOCK_SECS: Bound = Bound {
    key: "wall_clock_secs",
    default: 300,
    max: 3600,
};
pub(crate) const CPU_FUEL: Bound = Bound {
    key: "cpu_fuel",
    default: 20_000_000_000,
    max: 200_000_000_000,
};
pub(crate) const MEMORY_MB: Bound = Bound {
    key: "memory_mb",
    default: 256,
    max: 2048,
};
pub(crate) const MAX_EVENTS: Bound = Bound {
    key: "max_events",
    default: 100_000,
    max: 1_000_000,
};

pub(crate) const MAX_OPEN_MESSAGES: Bound = Bound {
    key: "max_open_messages",
    default: 16,
    max: 64,
};
pub(crate) const MAX_OUTPUT_MB: Bound = Bound {
    key: "max_output_mb",
    default: 64,
    max: 1024,
};

/// Bytes a turn may queue for the journal before its next write waits for
/// their commit (the outbox's backpressure; see `store::Outbox::throttle`).
pub(crate) const OUTBOX_BYTES: u64 = 1 << 20;

/// The longest `limits.approval_timeout_secs` (30 days); unset, an
/// approval waits for the operator's `--approval-timeout`, or forever.
pub(crate) const APPROVAL_TIMEOUT_MAX_SECS: u64 = 30 * 24 * 3600;

/// Every per-turn limit the manifest may set.
pub(crate) const BOUNDS: [&Bound; 6] = [
    &WALL_CLOCK_SECS,
    &CPU_FUEL,
    &MEMORY_MB,
    &MAX_EVENTS,
    &MAX_OPEN_MESSAGES,
    &MAX_OUTPUT_MB,
];

impl Default for TurnLimits {
    fn default() -> Self {
        TurnLimits::from_record(&LimitsRecord::default())
    }
}

impl TurnLimits {
    /// The defaults, overridden by what a deployment's manifest set (already
    /// checked against the maxima at deploy time; clamped again here).
    pub(crate) fn from_record(record: &LimitsRecord) -> TurnLimits {
        let pick =
            |value: Option<u64>, bound: &Bound| value.unwrap_or(bound.default).min(bound.max);
        TurnLimits {
            deadline: Duration::from_secs(pick(record.wall_clock_secs, &WALL_CLOCK_SECS)),
            fuel: pick(record.cpu_fuel, &CPU_FUEL),
            memory_bytes: (pick(record.memory_mb, &MEMORY_MB) as usize) << 20,
            max_events: pick(record.max_events, &MAX_EVENTS),
            max_open_messages: pick(record.max_open_messages, &MAX_OPEN_MESSAGES) as usize,
            max_output_bytes: pick(record.max_output_mb, &MAX_OUTPUT_MB) << 20,
            max_message_bytes: 1 << 20,
            max_payload_bytes: 256 << 10,
            max_history_page: 1000,
            approval_timeout: (record.approval_timeout_secs)
                .map(|secs| Duration::from_secs(secs.min(APPROVAL_TIMEOUT_MAX_SECS))),
            journal_room: u64::MAX,
            journal_cap: None,
            min_timer_delay: crate::runtime::DEFAULT_MIN_TIMER_DELAY,
        }
    }

    /// These limits for a turn of a session whose journal held
    /// `journal_bytes` when it started, under the operator's cap.
    pub(crate) fn in_journal(mut self, cap: Option<u64>, journal_bytes: u64) -> TurnLimits {
        if let Some(cap) = cap {
            self.journal_room = cap.saturating_sub(journal_bytes);
            self.journal_cap = Some(cap);
        }
        self
    }
}

/// Why a turn that would pass its session's journal cap fails.
pub(crate) fn journal_exceeded(cap: u64) -> String {
    format!(
        "the session's journal reached its cap of {} MiB (--max-session-journal-mb): start a new session",
        cap >> 20
    )
}

/// Why a turn that passed `limits.max_output_mb` fails.
pub(crate) fn output_exceeded(max_bytes: u64) -> String {
    format!(
        "the turn wrote more than {} MiB of events (limits.max_output_mb)",
        max_bytes >> 20
    )
}

/// The limits `describe` runs under at deploy time.
pub(crate) const DESCRIBE_DEADLINE: Duration = Duration::from_secs(5);
pub(crate) const DESCRIBE_MEMORY: usize = 64 << 20;
pub(crate) const DESCRIBE_FUEL: u64 = 2_000_000_000;
