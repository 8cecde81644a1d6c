//! The sender: every tick, and as soon as an attempt frees a slot while
//! more are due, the due deliveries (approval events first) are read, claimed through
//! the writer (a lease in each row: on PostgreSQL one host at a time
//! attempts a delivery, and a host that dies leaves it to another once the
//! lease passed), posted signed, and each attempt recorded with what comes
//! next: delivered (2xx), endpoint disabled (410), retried later
//! (exponential backoff with jitter) or given up after `RETRY_WINDOW`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rand::Rng;
use serde_json::Value;
use tokio::sync::{Notify, Semaphore};

use super::{WebhookOptions, links, sign};
use crate::net::PublicOnly;
use crate::secrets::Vault;
use crate::store::{
    AttemptOutcome, Db, DeliveryAttempt, DeliveryRecord, WebhookRecord, WriterHandle, now_rfc3339,
    unix_ms,
};

/// How long one attempt may take, connecting to the last byte.
pub(crate) const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a claim holds a delivery for its host.
const LEASE: Duration = Duration::from_secs(60);
/// A delivery is retried for this long after its event, then given up.
pub(crate) const RETRY_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// The longest wait between two attempts.
const MAX_DELAY: Duration = Duration::from_secs(3600);
/// Attempts in flight at once on one host.
const IN_FLIGHT: usize = 32;
/// Bytes of an answer's body kept with its attempt.
pub(crate) const KEPT_BODY_BYTES: usize = 1024;

/// What the sender needs.
pub(crate) struct Sender {
    pub store: Db,
    pub writer: WriterHandle,
    pub vault: Arc<Vault>,
    pub options: WebhookOptions,
    /// Signs decision links.
    pub links_key: [u8; 32],
    /// Where decision links point.
    pub public_url: String,
}

/// Starts the sender.
pub(crate) fn start(sender: Sender) -> anyhow::Result<()> {
    crate::util::install_tls_provider();
    let builder = reqwest::Client::builder()
        .timeout(ATTEMPT_TIMEOUT)
        .connect_timeout(ATTEMPT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(concat!("agenthost/", env!("CARGO_PKG_VERSION")));
    let builder = if sender.options.allow_private {
        builder
    } else {
        builder.https_only(true).dns_resolver(PublicOnly {
            flag: "--allow-private-webhooks",
        })
    };
    let client = builder.build()?;
    let sender = Arc::new(sender);
    let tick = (sender.options.retry_base).clamp(Duration::from_millis(50), Duration::from_secs(1));
    tokio::spawn(async move {
        if !sender.store.shared()
            && let Err(err) = release_own(&sender).await
        {
            tracing::warn!(error = %err, "cannot release the webhook leases of the previous run");
        }
        let slots = Arc::new(Semaphore::new(IN_FLIGHT));
        let freed = Arc::new(Notify::new());
        loop {
            match round(&sender, &client, &slots, &freed).await {
                // Every free slot was taken and more may be due: claim again
                // as soon as an attempt ends (or at the tick), so throughput
                // follows the receivers, not the tick.
                Ok(true) => {
                    let _ = tokio::time::timeout(tick, freed.notified()).await;
                }
                Ok(false) => tokio::time::sleep(tick).await,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot read or claim webhook deliveries");
                    tokio::time::sleep(tick).await;
                }
            }
        }
    });
    Ok(())
}

/// On the embedded engine this process is the only host: the leases a
/// previous run held (it died mid-attempt) are freed at once instead of
/// after `LEASE`.
async fn release_own(sender: &Sender) -> Result<(), crate::store::StoreError> {
    let pending = (sender.store)
        .read(|s| s.due_deliveries(u64::MAX, usize::MAX))
        .await?;
    let held: Vec<_> = (pending.iter())
        .filter(|d| d.lease_host.is_some())
        .map(|d| d.id)
        .collect();
    if !held.is_empty() {
        let released = sender.writer.release_deliveries(held).await?;
        tracing::info!(
            released,
            "released the webhook deliveries the previous run was attempting"
        );
    }
    Ok(())
}

/// Claims what is due (as many as there are free slots) and sends each;
/// whether every free slot was taken (more may be due).
async fn round(
    sender: &Arc<Sender>,
    client: &reqwest::Client,
    slots: &Arc<Semaphore>,
    freed: &Arc<Notify>,
) -> Result<bool, crate::store::StoreError> {
    let free = slots.available_permits();
    if free == 0 {
        return Ok(true);
    }
    let now = unix_ms(SystemTime::now());
    let due = (sender.store)
        .read(move |s| s.due_deliveries(now, free))
        .await?;
    let full = due.len() >= free;
    if due.is_empty() {
        return Ok(false);
    }
    let ids = due.iter().map(|d| d.id).collect();
    let lease_until = now + LEASE.as_millis() as u64;
    let claimed = sender
        .writer
        .claim_deliveries(ids, now, lease_until)
        .await?;
    for (delivery, endpoint) in claimed {
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            break; // Its lease passes and it is claimed again.
        };
        let (sender, client, freed) = (sender.clone(), client.clone(), freed.clone());
        tokio::spawn(async move {
            attempt(&sender, &client, delivery, endpoint).await;
            drop(permit);
            freed.notify_one();
        });
    }
    Ok(full)
}

/// One attempt, and its record.
async fn attempt(
    sender: &Sender,
    client: &reqwest::Client,
    delivery: DeliveryRecord,
    endpoint: WebhookRecord,
) {
    let at = now_rfc3339();
    let (status, error, body) = match post(sender, client, &delivery, &endpoint).await {
        Ok((status, body)) => (Some(status), None, Some(body)),
        Err(err) => (None, Some(err), None),
    };
    let outcome = match status {
        Some(s) if (200..300).contains(&s) => AttemptOutcome::Delivered,
        Some(410) => AttemptOutcome::Gone,
        _ => next_try(sender.options.retry_base, &delivery),
    };
    let label = match (&outcome, status) {
        (AttemptOutcome::Delivered, _) => "delivered",
        (AttemptOutcome::Gone, _) => "gone",
        (_, None) => "refused",
        _ => "failed",
    };
    crate::metrics::get()
        .webhook_attempts
        .get_or_create(&[("outcome", label)])
        .inc();
    tracing::info!(
        webhook = %endpoint.id, delivery = %delivery.message_id(),
        event = delivery.event_type, status, outcome = label,
        "webhook delivery attempted"
    );
    let record = DeliveryAttempt {
        at,
        status,
        error,
        body,
    };
    if let Err(err) = (sender.writer)
        .finish_attempt(delivery.id, record, outcome)
        .await
    {
        // Its lease passes and it is attempted again: at least once.
        tracing::warn!(error = %err, delivery = %delivery.message_id(), "cannot record a webhook attempt");
    }
}

/// When to try again, or give up.
fn next_try(base: Duration, delivery: &DeliveryRecord) -> AttemptOutcome {
    let now = unix_ms(SystemTime::now());
    let exponent = delivery.attempt_count.min(30);
    let delay = (base.saturating_mul(1u32 << exponent.min(20))).min(MAX_DELAY);
    // Jitter: 0.8 to 1.2 of the delay, so endpoints that failed together
    // are not retried together.
    let factor: f64 = rand::rng().random_range(0.8..1.2);
    let next = now + (delay.as_millis() as f64 * factor) as u64;
    if next > delivery.created_at_ms + RETRY_WINDOW.as_millis() as u64 {
        AttemptOutcome::GiveUp
    } else {
        AttemptOutcome::Retry(next)
    }
}

/// Posts the delivery, signed; its status and the start of its body.
async fn post(
    sender: &Sender,
    client: &reqwest::Client,
    delivery: &DeliveryRecord,
    endpoint: &WebhookRecord,
) -> Result<(u16, String), String> {
    let url = super::check_url(&endpoint.url, sender.options.allow_private)?;
    let body = body(sender, delivery, endpoint);
    let mut secrets = vec![super::open(&sender.vault, endpoint.id, &endpoint.secret)];
    if let (Some(previous), Some(until)) = (&endpoint.previous, endpoint.previous_until_ms)
        && until > unix_ms(SystemTime::now())
    {
        secrets.push(super::open(&sender.vault, endpoint.id, previous));
    }
    let secrets: Vec<String> = (secrets.into_iter())
        .collect::<Result<_, _>>()
        .map_err(|err| err.to_string())?;
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
    let id = delivery.message_id();
    let timestamp = unix_ms(SystemTime::now()) as i64 / 1000;
    let signature = sign::signature(&secrets, &id, timestamp, &body);
    let mut response = (client.post(url))
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(body)
        .send()
        .await
        .map_err(|err| chain(&err))?;
    let status = response.status().as_u16();
    let mut kept = Vec::new();
    while kept.len() < KEPT_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => kept.extend_from_slice(&chunk),
            _ => break,
        }
    }
    kept.truncate(KEPT_BODY_BYTES);
    Ok((status, String::from_utf8_lossy(&kept).into_owned()))
}

/// The body as sent: the stored payload, with decision links for an
/// endpoint that asked for them (the same on every attempt).
fn body(sender: &Sender, delivery: &DeliveryRecord, endpoint: &WebhookRecord) -> String {
    if !(endpoint.decision_links && delivery.event_type == "approval.requested") {
        return delivery.payload.clone();
    }
    let Ok(mut payload) = serde_json::from_str::<Value>(&delivery.payload) else {
        return delivery.payload.clone();
    };
    let data = &payload["data"];
    let (Some(session), Some(seq)) = (
        data["session_id"]
            .as_str()
            .and_then(|s| s.parse::<uuid::Uuid>().ok()),
        data["event_seq"].as_u64(),
    ) else {
        return delivery.payload.clone();
    };
    let expires = data["expires_at"].as_str().map(str::to_string);
    // The link's own end counts from the event, so every attempt sends the
    // same links.
    let ttl_ms = u64::try_from(sender.options.link_ttl.as_millis()).unwrap_or(u64::MAX);
    let until_ms = delivery.created_at_ms.saturating_add(ttl_ms);
    let until =
        humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(until_ms))
            .to_string();
    // Whichever comes first: the link's end or the approval's deadline
    // (RFC 3339 in one format, compared as text).
    let links_expire = match &expires {
        Some(deadline) if deadline.as_str() < until.as_str() => deadline.clone(),
        _ => until,
    };
    let link = |approve: bool| {
        let claim = links::Claim {
            webhook: endpoint.id,
            session,
            seq,
            approve,
            generation: endpoint.link_generation,
            until_ms,
            expires_at: expires.clone(),
        };
        format!(
            "{}/decision-links?t={}",
            sender.public_url.trim_end_matches('/'),
            links::token(&sender.links_key, &claim)
        )
    };
    payload["data"]["links"] = serde_json::json!({
        "approve": link(true), "deny": link(false), "expires_at": links_expire,
    });
    payload.to_string()
}

/// An error and its causes (reqwest's own text is terse).
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
