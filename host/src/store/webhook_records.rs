//! The webhooks' stored records (`store::domain::webhooks`): an endpoint
//! (its sealed signing secrets) and a delivery (its payload, state, lease
//! and last attempts). JSON on both engines; fields are only ever added.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::records::SecretRecord;

/// The event types an endpoint may subscribe to, in the documented order.
pub(crate) const WEBHOOK_EVENTS: [&str; 10] = [
    "approval.requested",
    "approval.decided",
    "approval.expired",
    "approval.withdrawn",
    "turn.ended",
    "turn.failed",
    "session.ended",
    "budget.reached",
    "deployment.succeeded",
    "deployment.failed",
];

/// A webhook endpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebhookRecord {
    pub id: Uuid,
    pub url: String,
    /// Subscribed event types (of `WEBHOOK_EVENTS`).
    pub events: Vec<String>,
    /// Only this app's events, when set.
    #[serde(default)]
    pub app_id: Option<Uuid>,
    #[serde(default)]
    pub app: Option<String>,
    /// `approval.requested` carries signed decision links.
    #[serde(default)]
    pub decision_links: bool,
    /// The signing secret (`whsec_…`), sealed by the vault.
    pub secret: SecretRecord,
    /// The secret before the last rotation, still signing until `previous_until_ms`.
    #[serde(default)]
    pub previous: Option<SecretRecord>,
    #[serde(default)]
    pub previous_until_ms: Option<u64>,
    /// The generation of its decision links: a rotation bumps it, and the
    /// links of an older one decide nothing. Absent: 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub link_generation: u64,
    /// Why the endpoint stopped receiving (a 410), if it did.
    #[serde(default)]
    pub disabled: Option<String>,
    pub created_at: String,
    /// The key that created it.
    pub key_id: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl WebhookRecord {
    /// Whether the endpoint receives events of `kind` about app `app`.
    pub fn wants(&self, kind: &str, app: Uuid) -> bool {
        self.disabled.is_none()
            && self.events.iter().any(|e| e == kind)
            && self.app_id.is_none_or(|id| id == app)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// Waiting for its next attempt.
    Pending,
    /// A 2xx came back.
    Delivered,
    /// Given up: the retry window passed, or the endpoint is gone.
    Failed,
}

/// One attempt at a delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeliveryAttempt {
    /// RFC 3339.
    pub at: String,
    /// The answer's status, if one came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why no answer came (refused address, timeout, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The start of the answer's body (truncated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// A delivery of one event to one endpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeliveryRecord {
    /// Its `webhook-id` is `msg_` and this id's simple form, the same on every attempt.
    pub id: Uuid,
    pub webhook_id: Uuid,
    /// The event type (`approval.requested`, ...).
    pub event_type: String,
    /// The body sent (`{"type","timestamp","data"}`), fixed at the event's commit.
    pub payload: String,
    pub created_at_ms: u64,
    pub state: DeliveryState,
    /// When the next attempt is due (Unix ms).
    pub next_at_ms: u64,
    /// The host attempting it, until `lease_until_ms`.
    #[serde(default)]
    pub lease_host: Option<Uuid>,
    #[serde(default)]
    pub lease_until_ms: u64,
    /// Attempts made so far.
    #[serde(default)]
    pub attempt_count: u32,
    /// The last attempts, oldest first (at most `MAX_KEPT_ATTEMPTS`).
    #[serde(default)]
    pub attempts: Vec<DeliveryAttempt>,
}

/// Attempts a delivery keeps (the count goes on).
pub(crate) const MAX_KEPT_ATTEMPTS: usize = 10;

impl DeliveryRecord {
    /// The `webhook-id` header.
    pub fn message_id(&self) -> String {
        format!("msg_{}", self.id.simple())
    }
}
