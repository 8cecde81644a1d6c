//! `/webhooks`: endpoints (create with their secret shown once, list, show,
//! delete, rotate), their deliveries (attempts and answers) and a resend by
//! hand. The rules and the durable deliveries are the store's
//! (`store::domain::webhooks`), the sending is `webhooks`'. Docs:
//! docs/webhooks.md.

use std::time::{Duration, SystemTime};

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use uuid::Uuid;

use super::extract::{Json, Path, Query};
use super::paging::Page;
use super::views::{CreatedWebhook, DeliveryPage, DeliveryView, WebhookView};
use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::keys::Principal;
use crate::store::{WEBHOOK_EVENTS, WebhookRecord, now_rfc3339, unix_ms};
use crate::webhooks::{check_url, seal, sign};

/// The longest grace a rotation may give the old secret.
const MAX_GRACE: Duration = Duration::from_secs(7 * 24 * 3600);
/// The grace when none is asked for.
const DEFAULT_GRACE: Duration = Duration::from_secs(24 * 3600);

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewWebhook {
    /// Where deliveries are POSTed (`https`; `http` and private addresses
    /// only with the operator's `--allow-private-webhooks`).
    url: String,
    /// Event types to receive (see docs/webhooks.md), at least one.
    events: Vec<String>,
    /// Only this app's events (slug or id); every app's when absent.
    #[serde(default)]
    app: Option<String>,
    /// `approval.requested` carries signed approve and deny links.
    #[serde(default)]
    decision_links: bool,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Rotate {
    /// Seconds the old secret keeps signing too (default 86400, at most 604800).
    #[serde(default)]
    grace_secs: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct DeliveryQuery {
    limit: Option<usize>,
    cursor: Option<String>,
}

fn webhook_id(raw: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(raw).map_err(|_| ApiError::new(ErrorCode::NotFound, "no such webhook"))
}

pub(super) async fn create(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<NewWebhook>,
) -> Result<(StatusCode, Json<CreatedWebhook>), ApiError> {
    check_url(&body.url, state.webhooks.allow_private)
        .map_err(|why| ApiError::new(ErrorCode::InvalidUrl, why))?;
    let mut events = body.events;
    events.sort_unstable();
    events.dedup();
    if events.is_empty() {
        return Err(ApiError::new(
            ErrorCode::InvalidBody,
            "`events` names at least one event type",
        ));
    }
    if let Some(unknown) = events
        .iter()
        .find(|e| !WEBHOOK_EVENTS.contains(&e.as_str()))
    {
        return Err(ApiError::new(
            ErrorCode::InvalidBody,
            format!(
                "`{unknown}` is not an event type; these are: {}",
                WEBHOOK_EVENTS.join(", ")
            ),
        ));
    }
    let id = Uuid::now_v7();
    let secret = sign::new_secret();
    let sealed = seal(&state.vault, id, &secret).map_err(ApiError::internal)?;
    let record = WebhookRecord {
        id,
        url: body.url,
        events,
        app_id: None,
        app: body.app,
        decision_links: body.decision_links,
        secret: sealed,
        previous: None,
        previous_until_ms: None,
        link_generation: 0,
        disabled: None,
        created_at: now_rfc3339(),
        key_id: principal.key_id.clone(),
    };
    let record = state.writer.create_webhook(record).await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedWebhook {
            webhook: WebhookView::from(&record),
            secret,
        }),
    ))
}

pub(super) async fn list(
    State(state): State<AppState>,
) -> Result<Json<Vec<WebhookView>>, ApiError> {
    let records = state.store.read(|s| s.webhooks()).await?;
    Ok(Json(records.iter().map(WebhookView::from).collect()))
}

async fn find(state: &AppState, id: Uuid) -> Result<WebhookRecord, ApiError> {
    let records = state.store.read(|s| s.webhooks()).await?;
    (records.into_iter().find(|r| r.id == id))
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("no webhook {id}")))
}

pub(super) async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<WebhookView>, ApiError> {
    let record = find(&state, webhook_id(&id)?).await?;
    Ok(Json(WebhookView::from(&record)))
}

pub(super) async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.writer.delete_webhook(webhook_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn rotate(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(body): Json<Rotate>,
) -> Result<(StatusCode, Json<CreatedWebhook>), ApiError> {
    let id = webhook_id(&id)?;
    let grace = body.grace_secs.map_or(DEFAULT_GRACE, Duration::from_secs);
    if grace > MAX_GRACE {
        return Err(ApiError::new(
            ErrorCode::InvalidBody,
            format!("`grace_secs` is at most {}", MAX_GRACE.as_secs()),
        ));
    }
    let secret = sign::new_secret();
    let sealed = seal(&state.vault, id, &secret).map_err(ApiError::internal)?;
    let until = unix_ms(SystemTime::now()) + grace.as_millis() as u64;
    let record = state.writer.rotate_webhook(id, sealed, until).await?;
    Ok((
        StatusCode::OK,
        Json(CreatedWebhook {
            webhook: WebhookView::from(&record),
            secret,
        }),
    ))
}

pub(super) async fn deliveries(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<DeliveryQuery>,
) -> Result<Json<DeliveryPage>, ApiError> {
    let id = webhook_id(&id)?;
    find(&state, id).await?;
    let page = Page::new(query.cursor.as_deref(), query.limit)?;
    let (before, limit) = (page.cursor, page.limit);
    let items = (state.store)
        .read(move |s| s.deliveries(id, before, limit + 1))
        .await?;
    let (items, next_cursor) = page.finish(items, |d| d.id);
    Ok(Json(DeliveryPage {
        items: items.iter().map(DeliveryView::from).collect(),
        next_cursor,
    }))
}

pub(super) async fn resend(
    State(state): State<AppState>,
    Path((id, delivery)): Path<(String, String)>,
) -> Result<(StatusCode, Json<DeliveryView>), ApiError> {
    let id = webhook_id(&id)?;
    let delivery = (delivery.strip_prefix("msg_").unwrap_or(&delivery))
        .parse::<Uuid>()
        .map_err(|_| ApiError::new(ErrorCode::NotFound, "no such delivery"))?;
    let record = state.writer.resend_delivery(id, delivery).await?;
    Ok((StatusCode::ACCEPTED, Json(DeliveryView::from(&record))))
}
