//! `GET /approvals/events`: the approvals feed as Server-Sent Events, so an
//! approver's screen never polls (docs/approvals.md).
//!
//! Without a usable `Last-Event-ID` the stream opens with one
//! `APPROVALS_SNAPSHOT` frame (the oldest pending approvals, at most
//! `--approvals-snapshot-max` of them, with `more` when there are others,
//! read together with the feed's head, which is its id); then, in the feed's order (its seq,
//! the commit order on every engine and every host), one frame per
//! `APPROVAL_REQUESTED`, `APPROVAL_DECIDED` and `APPROVAL_WITHDRAWN`, with
//! the seq as its id. A reconnect with the last id it saw resumes exactly
//! after it; an id older than the feed's retention gets a fresh snapshot.
//! The stream subscribes to the hub's feed watch before each read, so a
//! commit between a read and the wait is never slept through.

use std::convert::Infallible;
use std::time::Duration;

use axum::Extension;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use uuid::Uuid;

use super::approvals::item_view;
use super::extract::Query;
use super::views::ApprovalSnapshot;
use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::keys::Principal;
use crate::store::{FeedKind, FeedPage};

/// Entries read per read.
const CHUNK: usize = 256;
/// Keep-alive comment interval (as the session streams).
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The snapshot frame's event name.
pub(super) const SNAPSHOT: &str = "APPROVALS_SNAPSHOT";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FeedQuery {
    /// Only this app's approvals (slug or id).
    app: Option<String>,
    /// As the `Last-Event-ID` header (which wins).
    last_event_id: Option<String>,
}

pub(super) async fn stream(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<FeedQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let cursor = super::events::last_event_id(&headers, query.last_event_id);
    let app = match query.app {
        None => None,
        Some(name) => {
            let lookup = name.clone();
            let found = state.store.read(move |s| s.app(&lookup)).await?;
            let app = found.ok_or_else(|| {
                ApiError::new(ErrorCode::NotFound, format!("app `{name}` does not exist"))
            })?;
            Some(app.id)
        }
    };
    let mut watch = state.store.hub().feed_watch();
    watch.borrow_and_update();
    let after = match cursor.as_deref() {
        None | Some("") => None,
        Some(raw) => Some(raw.parse::<u64>().map_err(|_| unknown_id(raw))?),
    };
    // The first read, before the response: a bad id is an HTTP error.
    let (snapshot, first) = match after {
        Some(after) => {
            let page = read(&state, after, app).await?;
            if after > page.head {
                return Err(unknown_id(&after.to_string()));
            }
            if after >= page.purged_through {
                (None, Some((after, page)))
            } else {
                // Entries after it were purged: start again from a snapshot.
                (Some(snapshot(&state, app).await?), None)
            }
        }
        None => (Some(snapshot(&state, app).await?), None),
    };
    let mut shutdown = state.shutdown.clone();
    let mut revocations = state.keys.revocations();
    let key_id = principal.key_id;
    let events = async_stream::stream! {
        let _open = crate::metrics::StreamGuard::default();
        let (mut after, mut first) = match (snapshot, first) {
            (Some((head, frame)), _) => {
                yield Ok::<_, Infallible>(frame);
                (head, None)
            }
            (None, Some((after, page))) => (after, Some(page)),
            (None, None) => return,
        };
        loop {
            // Everything committed after `after`, chunk by chunk.
            loop {
                let page = match first.take() {
                    Some(page) => page,
                    None => {
                        watch.borrow_and_update();
                        match read(&state, after, app).await {
                            Ok(page) => page,
                            Err(err) => {
                                tracing::warn!(error = ?err, "approvals feed read failed; closing the stream");
                                return;
                            }
                        }
                    }
                };
                if super::events::revoked(&mut revocations, &state.keys, &key_id) {
                    return;
                }
                for item in &page.items {
                    match entry_frame(item.seq, &item.json) {
                        Ok(frame) => yield Ok(frame),
                        Err(err) => {
                            tracing::error!(seq = item.seq, error = %err, "unreadable approvals feed entry; closing the stream");
                            return;
                        }
                    }
                }
                after = after.max(page.read_through);
                if page.read_through >= page.head {
                    break;
                }
            }
            tokio::select! {
                changed = watch.changed() => if changed.is_err() { return },
                _ = shutdown.wait_for(|stop| *stop) => return,
                // Revoking the key ends its streams.
                revoked = revocations.recv() => match revoked {
                    Ok(id) if id == key_id => return,
                    Err(_) if !state.keys.contains(&key_id) => return,
                    _ => continue,
                },
            }
        }
    };
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}

fn unknown_id(raw: &str) -> ApiError {
    ApiError::new(
        ErrorCode::UnknownEventId,
        format!(
            "`{raw}` is not an id of the approvals feed; reconnect without it to start from a snapshot"
        ),
    )
}

async fn read(state: &AppState, after: u64, app: Option<Uuid>) -> Result<FeedPage, ApiError> {
    Ok(state
        .store
        .read(move |s| s.approval_feed(after, app, CHUNK))
        .await?)
}

/// The snapshot frame and the feed position it stands at.
async fn snapshot(state: &AppState, app: Option<Uuid>) -> Result<(u64, Event), ApiError> {
    let max = state.limits.approvals_snapshot;
    let (head, mut items) = (state.store)
        .read(move |s| s.approval_snapshot_page(app, max.saturating_add(1)))
        .await?;
    // One more than the bound was read: it says whether there are others.
    let more = items.len() > max;
    items.truncate(max);
    let items = items.iter().map(item_view).collect::<Result<Vec<_>, _>>()?;
    let data =
        serde_json::to_string(&ApprovalSnapshot { items, more }).map_err(ApiError::internal)?;
    let frame = Event::default()
        .id(head.to_string())
        .event(SNAPSHOT)
        .data(data);
    Ok((head, frame))
}

/// An entry's frame: its stored JSON as the data, its type as the event name.
fn entry_frame(seq: u64, json: &str) -> Result<Event, serde_json::Error> {
    #[derive(Deserialize)]
    struct Kind {
        #[serde(rename = "type")]
        kind: FeedKind,
    }
    let Kind { kind } = serde_json::from_str(json)?;
    Ok(Event::default()
        .id(seq.to_string())
        .event(kind.as_str())
        .data(json))
}
