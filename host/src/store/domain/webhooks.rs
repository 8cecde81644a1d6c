//! Webhooks' rules: endpoints (create, delete, rotate), and deliveries,
//! each written in the same transaction as the event behind it (`enqueue`,
//! which the writer runs on every batch before its commit), so a crash
//! never loses one; claimed by one host at a time (a lease in the row),
//! then marked delivered, retried or given up.

use serde_json::{Value, json};
use uuid::Uuid;

use super::clock::unix_ms;
use crate::journal::payloads;
use crate::journal::{EventType, StoredEvent};
use crate::store::Missing;
use crate::store::batch::{Batch, Hook, Op};
use crate::store::error::corrupt;
use crate::store::records::{
    ApprovalFeedEntry, DeploymentRecord, DeploymentStatus, SecretRecord, SessionRecord,
    WithdrawReason,
};
use crate::store::webhook_records::{
    DeliveryAttempt, DeliveryRecord, DeliveryState, MAX_KEPT_ATTEMPTS, WebhookRecord,
};
use crate::store::{StoreError, now_rfc3339};

/// Pending deliveries an endpoint may have by default; past it new events
/// are not recorded for it (logged and counted), except approval events,
/// which have a reserve of their own (`cap_of`).
pub(crate) const MAX_PENDING: u64 = 1000;

/// The pending count past which an event of `kind` is not recorded for an
/// endpoint whose cap is `cap`. Every other event is shed at the cap; an
/// approval event (`approval.*`, which an operator must hear of: its call
/// waits for a decision) only at twice the cap, so however many turns
/// fill an endpoint, `cap` approval events more still fit.
pub(crate) fn cap_of(kind: &str, cap: u64) -> u64 {
    if kind.starts_with("approval.") {
        cap.saturating_mul(2)
    } else {
        cap
    }
}
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
            let cap = cap_of(kind, cap);
            if *count >= cap {
                (crate::metrics::get().webhook_dropped)
                    .get_or_create(&[("event", kind)])
                    .inc();
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
        Hook::Announce { kind, app, data } => return Ok(Some((kind, *app, (**data).clone()))),
        Hook::Event { session, seq } => (*session, *seq),
    };
    let Some(event) = batch.written(session, seq) else {
        return Ok(None);
    };
    let event = event.clone();
    let record = batch.session(session)?.record.clone();
    let data = event_data(&event, &record).map_err(corrupt)?;
    Ok(data.map(|(kind, data)| (kind, record.app_id, data)))
}

/// The type and `data` of the webhook event a journal event of `session`
/// makes, if it makes one; an error when its payload does not read as its
/// type's.
pub(crate) fn event_data(
    event: &StoredEvent,
    session: &SessionRecord,
) -> serde_json::Result<Option<(&'static str, Value)>> {
    let app = &session.app_slug;
    let decided = |approved: bool, approver: String, name: &str| {
        let expired = approver == TIMEOUT_APPROVER;
        let verb = if approved { "approved" } else { "denied" };
        if expired {
            (
                "approval.expired",
                format!("the call of `{name}` expired undecided"),
            )
        } else {
            (
                "approval.decided",
                format!("{approver} {verb} the call of `{name}`"),
            )
        }
    };
    let (kind, summary, mut data) = match event.kind() {
        Some(EventType::ToolApprovalRequired) => {
            let Some(p) = event.payload::<payloads::ToolApprovalRequired>()? else {
                return Ok(None);
            };
            let reason = (p.reason.as_ref()).map(|r| format!(": {r}"));
            let user = (session.end_user.as_ref()).map(|u| format!(" for end user `{u}`"));
            (
                "approval.requested",
                format!(
                    "`{app}` asks to run `{}`{}{}",
                    p.name,
                    user.unwrap_or_default(),
                    reason.unwrap_or_default()
                ),
                json!({
                    "tool_call_id": p.tool_call_id, "tool": p.name,
                    "arguments": p.arguments, "reason": p.reason,
                    "expires_at": p.expires_at, "event_seq": event.seq,
                }),
            )
        }
        Some(EventType::ToolApprovalGranted) => {
            let Some(p) = event.payload::<payloads::ToolApprovalGranted>()? else {
                return Ok(None);
            };
            let (kind, summary) = decided(true, p.approver.clone(), &p.name);
            (
                kind,
                summary,
                json!({
                    "tool_call_id": p.tool_call_id, "tool": p.name,
                    "approved": true, "approver": p.approver, "key_id": p.key_id,
                    // A richer decision's parts, as journaled (docs/approvals.md).
                    "arguments": p.arguments, "original_arguments": p.original_arguments,
                    "result": p.result, "message": p.message,
                    "address_hash": p.address_hash,
                }),
            )
        }
        Some(EventType::ToolApprovalDenied) => {
            let Some(p) = event.payload::<payloads::ToolApprovalDenied>()? else {
                return Ok(None);
            };
            let (kind, summary) = decided(false, p.approver.clone(), &p.name);
            (
                kind,
                summary,
                json!({
                    "tool_call_id": p.tool_call_id, "tool": p.name,
                    "approved": false, "approver": p.approver, "key_id": p.key_id,
                    "message": p.message, "address_hash": p.address_hash,
                }),
            )
        }
        Some(EventType::TurnEnded) => {
            let Some(p) = event.payload::<payloads::TurnEnded>()? else {
                return Ok(None);
            };
            (
                "turn.ended",
                format!("turn {} of `{app}` ended", p.turn),
                json!({"turn": p.turn}),
            )
        }
        Some(EventType::TurnError) => {
            let Some(p) = event.payload::<payloads::TurnError>()? else {
                return Ok(None);
            };
            (
                "turn.failed",
                format!("turn {} of `{app}` failed ({})", p.turn, p.kind.as_str()),
                json!({"turn": p.turn, "kind": p.kind, "message": p.message}),
            )
        }
        Some(EventType::SessionEnded) => {
            let Some(p) = event.payload::<payloads::SessionEnded>()? else {
                return Ok(None);
            };
            (
                "session.ended",
                format!("a session of `{app}` ended"),
                json!({"reason": p.reason}),
            )
        }
        Some(EventType::BudgetReached) => {
            let Some(p) = event.payload::<payloads::BudgetReached>()? else {
                return Ok(None);
            };
            (
                "budget.reached",
                format!(
                    "a session of `{app}` paused at its LLM budget ({} {} of {})",
                    p.spent, p.unit, p.limit
                ),
                json!({
                    "call_id": p.call_id, "scope": p.scope, "unit": p.unit,
                    "limit": p.limit, "spent": p.spent, "reserved": p.reserved,
                    "needed": p.needed, "event_seq": event.seq,
                }),
            )
        }
        _ => return Ok(None),
    };
    if let Some(map) = data.as_object_mut() {
        map.insert("summary".into(), summary.into());
        map.insert("session_id".into(), json!(session.id));
        map.insert("app_id".into(), json!(session.app_id));
        map.insert("app".into(), json!(app));
        map.insert("end_user".into(), json!(session.end_user));
        map.insert("event_id".into(), json!(event.id));
        map.retain(|_, v| !v.is_null());
    }
    Ok(Some((kind, data)))
}

/// The `data` of `approval.withdrawn` for a withdrawal entry about
/// `record`'s session (its pending call still on the record).
pub(crate) fn withdrawn_data(record: &SessionRecord, entry: &ApprovalFeedEntry) -> Value {
    let tool = (record.pending_approval.as_ref()).map(|p| p.call.name.clone());
    let why = match entry.reason {
        Some(WithdrawReason::SessionDeleted) => "its session was deleted",
        _ => "its session ended",
    };
    let summary = match &tool {
        Some(tool) => format!("the call of `{tool}` will never be decided: {why}"),
        None => format!("a pending call will never be decided: {why}"),
    };
    let event_id = (entry.event.as_ref()).and_then(|e| e.get("id").cloned());
    let mut data = json!({
        "summary": summary, "session_id": record.id, "app_id": record.app_id,
        "app": record.app_slug, "end_user": record.end_user, "event_id": event_id,
        "tool_call_id": entry.tool_call_id, "tool": tool, "reason": entry.reason,
    });
    if let Some(map) = data.as_object_mut() {
        map.retain(|_, v| !v.is_null());
    }
    data
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
            let found =
                (batch.tx.app(app)?).ok_or_else(|| StoreError::not_found(Missing::App, app))?;
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
            return Err(StoreError::not_found(Missing::Webhook, self.0));
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
            .ok_or_else(|| StoreError::not_found(Missing::Webhook, self.id))?;
        record.previous = Some(std::mem::replace(&mut record.secret, self.secret.clone()));
        record.previous_until_ms = Some(self.grace_until_ms);
        // The links it gave before die with the old secret, at once.
        record.link_generation += 1;
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
            .ok_or_else(|| StoreError::not_found(Missing::Delivery, self.id))?;
        if delivery.state == DeliveryState::Pending {
            return Err(StoreError::Conflict(
                "the delivery is still pending: it will be attempted again by itself".into(),
            ));
        }
        let cap = cap_of(
            &delivery.event_type,
            batch.state.quotas.webhook_pending.unwrap_or(MAX_PENDING),
        );
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
