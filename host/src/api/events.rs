//! `GET /sessions/{id}/events`: the journal as Server-Sent Events, replay then tail.
//!
//! Exactly once, no gaps: the stream subscribes to the after-commit hub
//! *before* reading redb, replays in short chunks (one read transaction each,
//! never held across an await), then tails the hub, dropping by seq what
//! replay already sent. A gap or a lagged subscription re-reads redb. The
//! stream ends after SESSION_ENDED, and on server shutdown.
//!
//! `?format=ag-ui` sends the same journal as AG-UI events (`api::agui`),
//! with the same exact resumption; an AG-UI run's response is made here too.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

use super::caller::Caller;
use super::extract::{Path, Query};
use super::{ApiError, AppState, agui};
use crate::api::ErrorCode;
use crate::journal::{EventType, StoredEvent};
use crate::store::SessionStatus;

/// Events read from redb per read transaction.
const REPLAY_CHUNK: usize = 512;
/// Keep-alive comment interval.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

#[derive(Deserialize)]
pub(crate) struct EventsQuery {
    last_event_id: Option<String>,
    /// `journal` (the default) or `ag-ui`.
    format: Option<String>,
    /// A stream token; checked by `auth`, never logged.
    #[serde(default, rename = "token")]
    _token: Option<String>,
}

pub(crate) async fn stream(
    State(state): State<AppState>,
    principal: Caller,
    Path(id): Path<String>,
    Query(query): Query<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let cursor = last_event_id(&headers, query.last_event_id);
    let ag_ui = match query.format.as_deref() {
        None | Some("journal") => false,
        Some("ag-ui") => true,
        Some(other) => {
            return Err(ApiError::new(
                ErrorCode::InvalidQuery,
                format!("unknown format `{other}`: use journal or ag-ui"),
            ));
        }
    };
    let record = principal.session(&state, &id).await?;
    let session = record.id;
    let ended = record.status == SessionStatus::Ended;
    if ag_ui {
        return agui_stream(state, session, ended, cursor, principal.key_id.clone()).await;
    }
    let from = match cursor.as_deref() {
        None | Some("") => 0,
        Some(raw) => resume_point(&state, session, raw).await?,
    };
    let subscription = state.store.hub().subscribe(session);
    let first = read_chunk(&state, session, from).await?;
    if first.is_empty() && ended {
        // Nothing more will ever come: 204 tells an EventSource to stop reconnecting.
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let framer = |event: &StoredEvent| (vec![frame(event)], is_session_end(event));
    let events = frames(
        state,
        session,
        from,
        first,
        subscription,
        principal.key_id.clone(),
        framer,
    );
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}

/// The AG-UI form: the journal mapped from the start of the turn the
/// client is in (to name its run), sending only the frames after its
/// `Last-Event-ID` (an event id, or `<event id>:<n>`).
async fn agui_stream(
    state: AppState,
    session: Uuid,
    ended: bool,
    cursor: Option<String>,
    key_id: String,
) -> Result<Response, ApiError> {
    let after = match cursor.as_deref() {
        None | Some("") => None,
        Some(raw) => {
            let (event, delivered) = agui::parse_frame_id(raw).ok_or_else(|| unknown_event(raw))?;
            let next = resume_point(&state, session, &event.to_string()).await?;
            Some(agui::Position {
                seq: next - 1,
                delivered,
            })
        }
    };
    let start = match after {
        Some(p) => agui::turn_start(&state, session, p.seq).await?,
        None => 0,
    };
    let next = after.map_or(0, agui::Position::next_seq);
    if ended
        && (state
            .store
            .read(move |s| s.events(session, next, 1))
            .await?)
            .is_empty()
    {
        // As the journal form: nothing more will ever come.
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let subscription = state.store.hub().subscribe(session);
    let first = read_chunk(&state, session, start).await?;
    let framer = agui::journal_framer(session, after);
    let events = frames(state, session, start, first, subscription, key_id, framer);
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}

/// A stream's resumption point: the `Last-Event-ID` header, which wins over
/// the `last_event_id` query parameter.
pub(super) fn last_event_id(headers: &HeaderMap, query: Option<String>) -> Option<String> {
    (headers.get("last-event-id"))
        .map(|v| v.to_str().unwrap_or("\u{fffd}").trim().to_string())
        .or(query)
}

fn unknown_event(raw: &str) -> ApiError {
    ApiError::new(
        ErrorCode::UnknownEventId,
        format!(
            "`{raw}` is not the id of an event of this session; reconnect without it to replay from the start"
        ),
    )
}

/// The seq to resume from: strictly after the event `raw` names.
async fn resume_point(state: &AppState, session: Uuid, raw: &str) -> Result<u64, ApiError> {
    let unknown = || unknown_event(raw);
    let event = Uuid::parse_str(raw).map_err(|_| unknown())?;
    match state
        .store
        .read(move |s| s.event_seq(session, event))
        .await?
    {
        Some(seq) => Ok(seq + 1),
        None => Err(unknown()),
    }
}

pub(super) async fn read_chunk(
    state: &AppState,
    session: Uuid,
    from: u64,
) -> Result<Vec<StoredEvent>, ApiError> {
    Ok(state
        .store
        .read(move |s| s.events(session, from, REPLAY_CHUNK))
        .await?)
}

pub fn frame(event: &StoredEvent) -> Event {
    Event::default().id(event.id.to_string()).data(&*event.json)
}

/// The bytes of `frame(event)` as they leave in the response body: the
/// frame passed through axum's `Sse` body, as the stream sends it. For the
/// benchmarks (`bench_api`), which time the encoding itself.
#[doc(hidden)]
pub fn frame_bytes(event: &StoredEvent) -> Result<axum::body::Bytes, axum::Error> {
    let body = Sse::new(futures::stream::iter([Ok::<_, Infallible>(frame(event))]))
        .into_response()
        .into_body();
    futures::executor::block_on(axum::body::to_bytes(body, usize::MAX))
}

fn is_session_end(event: &StoredEvent) -> bool {
    event.is(EventType::SessionEnded)
}

/// The stream of a session's events from `from` (`first`: the first
/// chunk, already read), each made into frames by `framer`, which also says
/// whether the stream ends after it.
pub(super) fn frames(
    state: AppState,
    session: Uuid,
    from: u64,
    first: Vec<StoredEvent>,
    mut subscription: crate::store::Subscription,
    key_id: String,
    mut framer: impl FnMut(&StoredEvent) -> (Vec<Event>, bool) + Send + 'static,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let mut shutdown = state.shutdown.clone();
    let mut revocations = state.keys.revocations();
    // An end user revoked after this, seen after a lag of the broadcast,
    // ends the stream too (`end_users::revocation`).
    let opened_ms = crate::store::unix_ms(std::time::SystemTime::now());
    let user_revoked = move |state: &AppState, key_id: &str| {
        (state.end_users.revocations()).revoked_since(key_id, opened_ms)
    };
    async_stream::stream! {
        let _open = crate::metrics::StreamGuard::default();
        let mut next = from;
        let mut first = Some(first);
        loop {
            // Replay: chunk after chunk from redb until it has nothing newer
            // (at the start, and again after a gap or a lag). In its own
            // block, so an idle stream does not keep its last chunk alive.
            {
                loop {
                    let chunk = match first.take() {
                        Some(chunk) => chunk,
                        None => match read_chunk(&state, session, next).await {
                            Ok(chunk) => chunk,
                            Err(err) => {
                                tracing::warn!(%session, error = ?err, "replay failed; closing the stream");
                                return;
                            }
                        },
                    };
                    // A key revoked while its stream replays a long
                    // journal ends it here, not only once it reaches the tail.
                    if revoked(&mut revocations, &state.keys, &key_id)
                        || user_revoked(&state, &key_id)
                    {
                        return;
                    }
                    let full = chunk.len() == REPLAY_CHUNK;
                    for event in &chunk {
                        next = event.seq + 1;
                        let (out, end) = framer(event);
                        for frame in out {
                            yield Ok(frame);
                        }
                        if end {
                            return;
                        }
                    }
                    if !full {
                        break;
                    }
                }
            }
            // Tail: committed events as the writer publishes them, until the
            // session ends (return) or a gap or lag sends us back to redb.
            loop {
                let received = tokio::select! {
                    received = subscription.rx.recv() => received,
                    _ = shutdown.wait_for(|stop| *stop) => return,
                    // Revoking the key (or the key behind a stream token) ends its streams.
                    revoked = revocations.recv() => match revoked {
                        Ok(id) if id == key_id => return,
                        Err(_) if !still_valid(&state.keys, &key_id) || user_revoked(&state, &key_id) => return,
                        _ => continue,
                    },
                };
                match received {
                    Ok(event) if event.seq < next => {}
                    Ok(event) if event.seq == next => {
                        next += 1;
                        let (out, end) = framer(&event);
                        for frame in out {
                            yield Ok(frame);
                        }
                        if end {
                            return;
                        }
                    }
                    // A gap (cannot happen with in-order publishing) or a lag: redb has it all.
                    Ok(_) | Err(RecvError::Lagged(_)) => {
                        crate::metrics::get().stream_catch_ups.inc();
                        break;
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        }
    }
}

/// Whether the key `key_id` (or the key behind a stream token) was revoked
/// since the stream last looked, without waiting.
pub(super) fn revoked(
    revocations: &mut tokio::sync::broadcast::Receiver<String>,
    keys: &crate::keys::Keys,
    key_id: &str,
) -> bool {
    use tokio::sync::broadcast::error::TryRecvError;
    loop {
        match revocations.try_recv() {
            Ok(id) if id == key_id => return true,
            Ok(_) => {}
            Err(TryRecvError::Empty) => return false,
            // Missed some: whether the key is still held says it all.
            Err(TryRecvError::Lagged(_) | TryRecvError::Closed) => {
                return !still_valid(keys, key_id);
            }
        }
    }
}

/// Whether a stream's `key_id` still authenticates: an API key still in
/// the registry, or an end user (who names no key and is never revoked).
pub(super) fn still_valid(keys: &crate::keys::Keys, key_id: &str) -> bool {
    key_id.starts_with(crate::keys::END_USER_KEY_PREFIX) || keys.contains(key_id)
}
