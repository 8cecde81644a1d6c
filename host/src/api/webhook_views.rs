//! The webhooks' response bodies (`/webhooks`), re-exported by `views`.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::store::{DeliveryAttempt, DeliveryRecord, DeliveryState, WebhookRecord};

/// A webhook endpoint (never its secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct WebhookView {
    pub id: Uuid,
    pub url: String,
    pub events: Vec<String>,
    /// Only this app's events, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    pub decision_links: bool,
    /// Why it receives nothing more (it answered 410), if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<String>,
    /// Until when (Unix ms) the secret before the last rotation signs too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_secret_until_ms: Option<u64>,
    pub created_at: String,
}

impl From<&WebhookRecord> for WebhookView {
    fn from(r: &WebhookRecord) -> Self {
        WebhookView {
            id: r.id,
            url: r.url.clone(),
            events: r.events.clone(),
            app_id: r.app_id,
            app: r.app.clone(),
            decision_links: r.decision_links,
            disabled: r.disabled.clone(),
            previous_secret_until_ms: r.previous.as_ref().and(r.previous_until_ms),
            created_at: r.created_at.clone(),
        }
    }
}

/// A new endpoint, or a rotated one: its signing secret, shown this once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct CreatedWebhook {
    #[serde(flatten)]
    pub webhook: WebhookView,
    /// `whsec_` and base64: the Standard Webhooks form.
    pub secret: String,
}

/// A delivery, its attempts and answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct DeliveryView {
    /// Its `webhook-id` header, the same on every attempt.
    pub id: String,
    pub event_type: String,
    pub state: DeliveryState,
    pub created_at_ms: u64,
    /// When the next attempt is due, while pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_at_ms: Option<u64>,
    pub attempt_count: u32,
    /// The last attempts, oldest first (at most 10).
    pub attempts: Vec<DeliveryAttempt>,
    /// The body sent (without decision links).
    pub payload: Value,
}

impl From<&DeliveryRecord> for DeliveryView {
    fn from(r: &DeliveryRecord) -> Self {
        DeliveryView {
            id: r.message_id(),
            event_type: r.event_type.clone(),
            state: r.state,
            created_at_ms: r.created_at_ms,
            next_at_ms: (r.state == DeliveryState::Pending).then_some(r.next_at_ms),
            attempt_count: r.attempt_count,
            attempts: r.attempts.clone(),
            payload: serde_json::from_str(&r.payload).unwrap_or(Value::Null),
        }
    }
}

/// A page of deliveries, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct DeliveryPage {
    pub items: Vec<DeliveryView>,
    /// The `cursor` of the next page, if there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}
