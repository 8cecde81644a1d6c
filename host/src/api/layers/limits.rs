//! The operator's limits on what one client may hold of the API at once
//! (docs/limits.md#limits-on-api-requests): open event streams, the time a
//! request body may take, the size of the approvals feed's snapshot, the
//! turns that may wait for a slot.

use super::body_timeout::BodyTimeout;
use super::stream_caps::StreamCaps;

/// Pending approvals the feed's first frame carries unless the operator
/// says otherwise (`--approvals-snapshot-max`).
pub(crate) const DEFAULT_APPROVALS_SNAPSHOT: usize = 100;

/// The flags' values, each with its documented default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiLimits {
    /// Event streams open at once per key and per end user.
    pub streams: StreamCaps,
    /// How long a request body may take to arrive.
    pub body_timeout: BodyTimeout,
    /// Pending approvals in the approvals feed's snapshot frame (at least 1).
    pub approvals_snapshot: usize,
    /// Turns that may wait for a slot before new ones are refused (0: no bound).
    pub max_queued_turns: usize,
    /// Failed authentications per source address per minute (0: off).
    pub auth_failures_per_minute: u32,
}

impl Default for ApiLimits {
    fn default() -> Self {
        ApiLimits {
            streams: StreamCaps::default(),
            body_timeout: BodyTimeout::default(),
            approvals_snapshot: DEFAULT_APPROVALS_SNAPSHOT,
            max_queued_turns: super::overload::DEFAULT_MAX_QUEUED,
            auth_failures_per_minute: super::auth_throttle::DEFAULT_PER_MINUTE,
        }
    }
}
