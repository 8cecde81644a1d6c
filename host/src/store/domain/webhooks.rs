//! Webhooks' rules: endpoints (create, delete, rotate), and deliveries,
//! each written in the same transaction as the event behind it (`enqueue`,
//! which the writer runs on every batch before its commit), so a crash
//! never loses one; claimed by one host at a time (a lease in the row),
//! then marked delivered, retried or given up.

use serde_json::{Value, json};
use uuid::Uuid;

use super::clock::unix_ms;
use crate::store::batch::{Batch, Hook, Op};
use crate::store::error::corrupt;
use crate::store::records::{DeploymentRecord, DeploymentStatus, SecretRecord, SessionRecord};
use crate::store::webhook_records::{
    DeliveryAttempt, DeliveryRecord, DeliveryState, MAX_KEPT_ATTEMPTS, WebhookRecord,
};
use crate::store::{StoreError, now_rfc3339};

/// Pending deliveries an endpoint may have by default; past it new events
/// are not recorded for it (logged and counted).
pub(crate) const MAX_PENDING: u64 = 1000;
/// The approver of a decision made by the approval's deadline (`expiry`).
const TIMEOUT_APPROVER: &str = "timeout";

/// Records the deliveries of what the batch did, for every endpoint that
/// wants it: the last thing the writer does before the batch's commit.
pub(in crate::store) fn enqueue(batch: &mut Batch<'_>) -> Result<(), StoreError> {
    if batch.changes.hooks.is_empty() {
        return Ok(());
    }
    let endpoints = batch.tx.webhooks()?;
    let hooks = std::mem::take(&mut batch.changes.hooks);
    if endpoints.iter().all(|e| e.disabled.is_some()) {
        return Ok(());
    }
    let cap = batch.state.quotas.webhook_pending.unwrap_or(MAX_PENDING);
    let mut pending: Vec<Option<u64>> = vec![None; endpoints.len()];
    let now = unix_ms(std::time::SystemTime::now());
    for hook in hooks {
        let Some((kind, app, data)) = announce(batch, &hook)? else {
            continue;
        };
        let body = json!({"type": kind, "timestamp": now_rfc3339(), "data": data}).to_string();
        for (endpoint, count) in endpoints.iter().zip(pending.iter_mut()) {
            if !endpoint.wants(kind, app) {
                continue;
            }
            let count = match count {
                Some(n) => n,
                None => count.insert(batch.tx.pending_deliveries(endpoint.id)?),
            };
            if *count >= cap {
                crate::metrics::get().webhook_dropped.inc();
                tracing::warn!(webhook = %endpoint.id, event = kind, cap, "webhook endpoint has too many pending deliveries; event not recorded for it");
                continue;
            }
            *count += 1;
            batch.tx.put_delivery(&DeliveryRecord {
                id: Uuid::now_v7(),
                webhook_id: endpoint.id,
                event_type: kind.to_string(),
                payload: body.clone(),
                created_at_ms: now,
                state: DeliveryState::Pending,
                next_at_ms: now,
                lease_host: None,
                lease_until_ms: 0,
                attempt_count: 0,
                attempts: Vec::new(),
            })?;
        }
    }
    Ok(())
}

/// The webhook event of a hook: its type, its app and its `data`.
fn announce(
    batch: &mut Batch<'_>,
    hook: &Hook,
) -> Result<Option<(&'static str, Uuid, Value)>, StoreError> {
    let (session, seq) = match hook {
        Hook::Deployment(record) => {
            let app = batch.tx.app(&record.app_id.to_string())?;
            let slug = app.map(|a| a.slug).unwrap_or_default();
            let (kind, data) = deployment_data(record, &slug);
            return Ok(Some((kind, record.app_id, data)));
        }
        Hook::Event { session, seq } => (*session, *seq),
    };
    let Some(event) = batch.written(session, seq) else {
        return Ok(None);
    };
    let envelope: Value = serde_json::from_str(&event.json).map_err(corrupt)?;
    let record = batch.session(session)?.record.clone();
    Ok(event_data(&envelope, &record).map(|(kind, data)| (kind, record.app_id, data)))
}

/// The type and `data` of the webhook event a journal event (its
/// client-facing envelope) of `session` makes, if it makes one.
pub(crate) fn event_data(
    envelope: &Value,
    session: &SessionRecord,
) -> Option<(&'static str, Value)> {
    let p = &envelope["payload"];
    let str_of = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let app = &session.app_slug;
    let (kind, summary, mut data) = match envelope["type"].as_str().unwrap_or_default() {
        "TOOL_APPROVAL_REQUIRED" => (
            "approval.requested",
            format!(
                "`{app}` asks to run `{}`{}",
                str_of(&p["name"]),
                p["reason"]
                    .as_str()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
            json!({
                "tool_call_id": p["tool_call_id"], "tool": p["name"],
                "arguments": p["arguments"], "reason": p["reason"],
                "expires_at": p["expires_at"], "event_seq": envelope["seq"],
            }),
        ),
        kind @ ("TOOL_APPROVAL_GRANTED" | "TOOL_APPROVAL_DENIED") => {
            let approved = kind == "TOOL_APPROVAL_GRANTED";
            let approver = str_of(&p["approver"]);
            let expired = approver == TIMEOUT_APPROVER;
            let verb = if approved { "approved" } else { "denied" };
            (
                if expired {
                    "approval.expired"
                } else {
                    "approval.decided"
                },
                if expired {
                    format!("the call of `{}` expired undecided", str_of(&p["name"]))
                } else {
                    format!("{approver} {verb} the call of `{}`", str_of(&p["name"]))
                },
                json!({
                    "tool_call_id": p["tool_call_id"], "tool": p["name"],
                    "approved": approved, "approver": approver, "key_id": p["key_id"],
                    // A richer decision's parts, as journaled (docs/approvals.md).
                    "arguments": p["arguments"], "original_arguments": p["original_arguments"],
                    "result": p["result"], "message": p["message"],
                }),
            )
        }
        "TURN_ENDED" => (
            "turn.ended",
            format!("turn {} of `{app}` ended", p["turn"]),
            json!({"turn": p["turn"]}),
        ),
        "TURN_ERROR" => (
            "turn.failed",
            format!(
                "turn {} of `{app}` failed ({})",
                p["turn"],
                str_of(&p["kind"])
            ),
            json!({"turn": p["turn"], "kind": p["kind"], "message": p["message"]}),
        ),
        "SESSION_ENDED" => (
            "session.ended",
            format!("a session of `{app}` ended"),
            json!({"reason": p["reason"]}),
        ),
        _ => return None,
    };
    if let Some(map) = data.as_object_mut() {
        map.insert("summary".into(), summary.into());
        map.insert("session_id".into(), json!(session.id));
        map.insert("app_id".into(), json!(session.app_id));
        map.insert("app".into(), json!(app));
        map.insert("event_id".into(), envelope["id"].clone());
        map.retain(|_, v| !v.is_null());
    }
    Some((kind, data))
}

/// The type and `data` of the webhook event a finished build makes.
pub(crate) fn deployment_data(record: &DeploymentRecord, slug: &str) -> (&'static str, Value) {
    let failed = record.status == DeploymentStatus::Failed;
    let (kind, summary) = if failed {
        (
            "deployment.failed",
            format!("version {} of `{slug}` failed to build", record.version),
        )
    } else {
        (
            "deployment.succeeded",
            format!("version {} of `{slug}` is built", record.version),
        )
    };
    let mut data = json!({
        "summary": summary, "deployment_id": record.id, "app_id": record.app_id,
        "app": slug, "version": record.version, "status": record.status,
        "error": record.error,
    });
    if let Some(map) = data.as_object_mut() {
        map.retain(|_, v| !v.is_null());
    }
    (kind, data)
}

/// A new endpoint (its `app` given as slug or id is resolved here).
pub(in crate::store) struct CreateWebhook {
    pub record: WebhookRecord,
}

impl Op for CreateWebhook {
    type Output = WebhookRecord;

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<WebhookRecord, StoreError> {
        let mut record = self.record.clone();
        if let Some(app) = &record.app {
            let found = (batch.tx.app(app)?).ok_or_else(|| StoreError::not_found("app", app))?;
            record.app_id = Some(found.id);
            record.app = Some(found.slug);
        }
        batch.tx.put_webhook(&record)?;
        Ok(record)
    }
}

pub(in crate::store) struct DeleteWebhook(pub Uuid);

impl Op for DeleteWebhook {
    type Output = ();

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<(), StoreError> {
        if !batch.tx.remove_webhook(self.0)? {
            return Err(StoreError::not_found("webhook", self.0));
        }
        Ok(())
    }
}

/// A new signing secret; the old one signs too until `grace_until_ms`.
pub(in crate::store) struct RotateWebhook {
    pub id: Uuid,
    pub secret: SecretRecord,
    pub grace_until_ms: u64,
}

impl Op for RotateWebhook {
    type Output = WebhookRecord;

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<WebhookRecord, StoreError> {
        let mut record = (batch.tx.webhook(self.id)?)
            .ok_or_else(|| StoreError::not_found("webhook", self.id))?;
        record.previous = Some(std::mem::replace(&mut record.secret, self.secret.clone()));
        record.previous_until_ms = Some(self.grace_until_ms);
        batch.tx.put_webhook(&record)?;
        Ok(record)
    }
}

/// Takes the due deliveries among `ids` for host `host` until
/// `lease_until_ms`: those another host took meanwhile are left out.
pub(in crate::store) struct ClaimDeliveries {
    pub ids: Vec<Uuid>,
    pub host: Uuid,
    pub now_ms: u64,
    pub lease_until_ms: u64,
}

impl Op for ClaimDeliveries {
    type Output = Vec<(DeliveryRecord, WebhookRecord)>;

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<Self::Output, StoreError> {
        let mut claimed = Vec::new();
        // Rows locked in one order on every host (no deadlock between claims).
        self.ids.sort_unstable();
        for id in &self.ids {
            let Some(mut delivery) = batch.tx.delivery(*id)? else {
                continue;
            };
            if delivery.state != DeliveryState::Pending
                || delivery.next_at_ms > self.now_ms
                || delivery.lease_until_ms >= self.now_ms
            {
                continue;
            }
            let Some(endpoint) = batch.tx.webhook(delivery.webhook_id)? else {
                continue;
            };
            if endpoint.disabled.is_some() {
                // A disabled endpoint receives nothing more.
                delivery.state = DeliveryState::Failed;
                batch.tx.put_delivery(&delivery)?;
                continue;
            }
            delivery.lease_host = Some(self.host);
            delivery.lease_until_ms = self.lease_until_ms;
            batch.tx.put_delivery(&delivery)?;
            claimed.push((delivery, endpoint));
        }
        Ok(claimed)
    }
}

/// What an attempt came to.
#[derive(Debug, Clone)]
pub enum AttemptOutcome {
    /// A 2xx.
    Delivered,
    /// Try again at this time (Unix ms).
    Retry(u64),
    /// Give up (the retry window passed).
    GiveUp,
    /// The endpoint answered 410: it is disabled, the delivery given up.
    Gone,
}

/// Records an attempt of a delivery this host claimed.
pub(in crate::store) struct FinishAttempt {
    pub id: Uuid,
    pub host: Uuid,
    pub attempt: DeliveryAttempt,
    pub outcome: AttemptOutcome,
}

impl Op for FinishAttempt {
    type Output = ();

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<(), StoreError> {
        let Some(mut delivery) = batch.tx.delivery(self.id)? else {
            return Ok(());
        };
        if delivery.lease_host != Some(self.host) || delivery.state != DeliveryState::Pending {
            // Its lease passed to another host (or it was resent): theirs now.
            return Ok(());
        }
        delivery.attempt_count += 1;
        delivery.attempts.push(self.attempt.clone());
        let excess = delivery.attempts.len().saturating_sub(MAX_KEPT_ATTEMPTS);
        delivery.attempts.drain(..excess);
        delivery.lease_host = None;
        delivery.lease_until_ms = 0;
        match self.outcome {
            AttemptOutcome::Delivered => delivery.state = DeliveryState::Delivered,
            AttemptOutcome::Retry(at) => delivery.next_at_ms = at,
            AttemptOutcome::GiveUp => delivery.state = DeliveryState::Failed,
            AttemptOutcome::Gone => {
                delivery.state = DeliveryState::Failed;
                if let Some(mut endpoint) = batch.tx.webhook(delivery.webhook_id)? {
                    endpoint.disabled = Some(format!(
                        "the endpoint answered 410 Gone at {}",
                        self.attempt.at
                    ));
                    batch.tx.put_webhook(&endpoint)?;
                }
            }
        }
        batch.tx.put_delivery(&delivery)
    }
}

/// Sends a delivery again (by hand): pending and due now, within the cap.
pub(in crate::store) struct ResendDelivery {
    pub webhook: Uuid,
    pub id: Uuid,
}

impl Op for ResendDelivery {
    type Output = DeliveryRecord;

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<DeliveryRecord, StoreError> {
        let mut delivery = (batch.tx.delivery(self.id)?)
            .filter(|d| d.webhook_id == self.webhook)
            .ok_or_else(|| StoreError::not_found("delivery", self.id))?;
        if delivery.state == DeliveryState::Pending {
            return Err(StoreError::Conflict(
                "the delivery is still pending: it will be attempted again by itself".into(),
            ));
        }
        let cap = batch.state.quotas.webhook_pending.unwrap_or(MAX_PENDING);
        if batch.tx.pending_deliveries(self.webhook)? >= cap {
            return Err(StoreError::Conflict(format!(
                "the endpoint already has {cap} pending deliveries"
            )));
        }
        delivery.state = DeliveryState::Pending;
        delivery.next_at_ms = unix_ms(std::time::SystemTime::now());
        delivery.lease_host = None;
        delivery.lease_until_ms = 0;
        batch.tx.put_delivery(&delivery)?;
        Ok(delivery)
    }
}

/// Frees the leases of `ids` (pending deliveries a host that is gone was
/// attempting): on the embedded engine, the one host's restart.
pub(in crate::store) struct ReleaseDeliveries(pub Vec<Uuid>);

impl Op for ReleaseDeliveries {
    type Output = usize;

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<usize, StoreError> {
        let mut released = 0;
        for id in &self.0 {
            let Some(mut delivery) = batch.tx.delivery(*id)? else {
                continue;
            };
            if delivery.state == DeliveryState::Pending && delivery.lease_host.is_some() {
                delivery.lease_host = None;
                delivery.lease_until_ms = 0;
                batch.tx.put_delivery(&delivery)?;
                released += 1;
            }
        }
        Ok(released)
    }
}

/// Forgets up to `limit` finished deliveries made before `before_ms` (Unix ms).
pub(in crate::store) struct PurgeDeliveries {
    pub before_ms: u64,
    pub limit: usize,
}

impl Op for PurgeDeliveries {
    type Output = usize;

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<usize, StoreError> {
        batch.tx.purge_deliveries(self.before_ms, self.limit)
    }
}
