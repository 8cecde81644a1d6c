//! Per-turn limits applied by the runtime (defaults; the limits issue makes them configurable).

use std::time::Duration;

/// What one turn may use.
#[derive(Debug, Clone)]
pub struct TurnLimits {
    /// Wall clock over the whole turn, host I/O included.
    pub deadline: Duration,
    /// Bytes of each linear memory.
    pub memory_bytes: usize,
    /// Events one turn may journal.
    pub max_events: u64,
    /// Bytes of one message's text.
    pub max_message_bytes: usize,
    /// Bytes of one JSON payload (tool arguments, tool output).
    pub max_payload_bytes: usize,
    /// Events in one `read-history` page.
    pub max_history_page: usize,
}

impl Default for TurnLimits {
    fn default() -> Self {
        TurnLimits {
            deadline: Duration::from_secs(300),
            memory_bytes: 256 << 20,
            max_events: 100_000,
            max_message_bytes: 1 << 20,
            max_payload_bytes: 256 << 10,
            max_history_page: 1000,
        }
    }
}

/// The limits `describe` runs under at deploy time.
pub const DESCRIBE_DEADLINE: Duration = Duration::from_secs(5);
pub const DESCRIBE_MEMORY: usize = 64 << 20;
