//! `POST /ag-ui/{app}/{route}`: an AG-UI run on a thread. The thread's
//! session (created on its first run) takes the newest user message as its
//! next input, or `resume` decides the approval the previous run was
//! interrupted on; the response streams that turn in AG-UI events, from its
//! RUN_STARTED to its RUN_FINISHED or RUN_ERROR, then ends.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::protocol::{
    AgUiEvent, InputMessage, MAX_THREAD_ID, ResumeEntry, ResumeStatus, RunAgentInput, RunError,
};
use super::{Mapper, frames, parse_frame_id};
use crate::api::ErrorCode;
use crate::api::caller::Caller;
use crate::api::decision_details;
use crate::api::extract::{Json, Path};
use crate::api::turns::{self, Target};
use crate::api::{ApiError, AppState};
use crate::journal::StoredEvent;
use crate::store::{Decision, thread_key};
use uuid::Uuid;

/// Keep-alive comment interval.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Longest `approver` accepted (as `POST /sessions/{id}/approval`).
const MAX_APPROVER: usize = 200;

pub(crate) async fn run(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, route)): Path<(String, String)>,
    Json(input): Json<RunAgentInput>,
) -> Result<Response, ApiError> {
    state.refuse_if_shutting_down()?;
    let length = input.thread_id.chars().count();
    if length == 0 || length > MAX_THREAD_ID {
        return Err(ApiError::new(
            ErrorCode::InvalidBody,
            format!("`threadId` must be 1 to {MAX_THREAD_ID} characters"),
        ));
    }
    // The route without its leading `/` (a `/` inside it as `%2F`).
    let route = format!("/{route}");
    let app = caller.app(&state, &app).await?;
    let started = match input.resume.as_deref() {
        Some(entries) if !entries.is_empty() => {
            if !caller.is_platform() {
                return Err(ApiError::new(
                    ErrorCode::Forbidden,
                    "answering an interrupt decides an approval, which needs a platform key",
                ));
            }
            let mut decision = decision(&caller, entries)?;
            // Each end user's threads are their own (`store::thread_key`).
            let (app_id, thread) = (app.id, thread_key(&input.thread_id, caller.user_id()));
            let route = route.clone();
            let session = state
                .store
                .read(move |s| s.thread_session(app_id, &route, &thread))
                .await?;
            let Some(session) = session else {
                return Ok(refusal(
                    "unknown_interrupt",
                    "this thread has no session, so no interrupt to answer",
                ));
            };
            let interrupt = entries[0].interrupt_id.clone();
            let seq = match parse_frame_id(&interrupt) {
                Some((id, None)) => state.store.read(move |s| s.event_seq(session, id)).await?,
                _ => None,
            };
            if seq.is_some() && decision.details.arguments.is_some() {
                // Edited arguments are checked against the tool's schema
                // (422 decides nothing); the writer then refuses another call.
                decision.checked_seq =
                    decision_details::check_arguments(&state, session, &decision.details).await?;
            }
            match seq {
                Some(seq) => (state.writer.decide_at(session, seq, decision).await)
                    .map(|turn| (turn.session.id, turn.ticket.started_seq))
                    .map_err(ApiError::from),
                _ => {
                    return Ok(refusal(
                        "unknown_interrupt",
                        format!("`{interrupt}` is not an interrupt of this thread"),
                    ));
                }
            }
        }
        _ => {
            let text = newest_user_text(&input.messages)?;
            let target = Target::Thread {
                app: app.id,
                route,
                thread: input.thread_id.clone(),
            };
            (turns::start(&state, &caller, target, Value::String(text), None).await)
                .map(|started| (started.session, started.started_seq.unwrap_or_default()))
        }
    };
    let (session, started_seq) = match started {
        Ok(started) => started,
        // The thread's state refuses the run (a turn in progress, an
        // approval pending, the session ended): AG-UI says so with RUN_ERROR.
        Err(err) if err.code == ErrorCode::Conflict => return Ok(refusal("conflict", err.message)),
        Err(err) => return Err(err),
    };
    let run = (input.thread_id, input.run_id);
    Ok(stream(state, &caller, (session, started_seq), run).await)
}

/// Streams the turn from its TURN_STARTED to the end of its run.
async fn stream(
    state: AppState,
    caller: &Caller,
    (session, started_seq): (Uuid, u64),
    (thread_id, run_id): (String, String),
) -> Response {
    let mut mapper = Mapper::client(session, thread_id, run_id);
    let framer = move |event: &StoredEvent| {
        let mapped = mapper.map(event);
        let end = mapped.iter().any(AgUiEvent::ends_run);
        (frames(event, mapped, None), end)
    };
    match turns::follow(state, caller, session, started_seq, framer).await {
        Ok(events) => Sse::new(events)
            .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
            .into_response(),
        Err(err) => err.into_response(),
    }
}

/// A run refused before it started: a stream of one RUN_ERROR.
fn refusal(code: &str, message: impl Into<String>) -> Response {
    let error = AgUiEvent::RunError(RunError {
        message: message.into(),
        code: code.into(),
        metadata: None,
    });
    let frame: Result<Event, Infallible> = Ok(super::frame(&error));
    Sse::new(futures::stream::iter([frame])).into_response()
}

/// The text of the newest user message: its content, or its text parts.
fn newest_user_text(messages: &[InputMessage]) -> Result<String, ApiError> {
    let none = || {
        ApiError::new(
            ErrorCode::NoUserMessage,
            "`messages` has no user message with text: the newest one is the run's input",
        )
    };
    let message = (messages.iter().rev())
        .find(|m| m.role == "user")
        .ok_or_else(none)?;
    match &message.content {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter(|part| part["type"] == "text")
                .filter_map(|part| part["text"].as_str())
                .collect();
            if texts.is_empty() {
                return Err(none());
            }
            Ok(texts.join("\n"))
        }
        _ => Err(none()),
    }
}

/// The decision a `resume` carries: one entry, for the one interrupt a run
/// ends with. `resolved` takes `{"approved": bool, "approver"?: string,
/// "arguments"?, "message"?: string, "result"?}` (as
/// `POST /sessions/{id}/approval`); `cancelled` denies.
fn decision(caller: &Caller, entries: &[ResumeEntry]) -> Result<Decision, ApiError> {
    let [entry] = entries else {
        return Err(ApiError::new(
            ErrorCode::InvalidBody,
            "`resume` answers the one interrupt a run ends with: give exactly one entry",
        ));
    };
    let invalid = || {
        ApiError::new(
            ErrorCode::InvalidBody,
            format!(
                "a `resolved` resume payload is {{\"approved\": bool, \"approver\"?: 1 to {MAX_APPROVER} bytes, \"arguments\"?, \"message\"?: text, \"result\"?}}"
            ),
        )
    };
    let mut details = Default::default();
    let (approved, approver) = match entry.status {
        ResumeStatus::Cancelled => (false, None),
        ResumeStatus::Resolved => {
            let payload = entry.payload.as_ref().ok_or_else(invalid)?;
            let approved = payload["approved"].as_bool().ok_or_else(invalid)?;
            let approver = match &payload["approver"] {
                Value::Null => None,
                Value::String(a) => {
                    let a = a.trim();
                    if a.is_empty() || a.len() > MAX_APPROVER {
                        return Err(invalid());
                    }
                    Some(a.to_string())
                }
                _ => return Err(invalid()),
            };
            let message = match &payload["message"] {
                Value::Null => None,
                Value::String(m) => Some(m.clone()),
                _ => return Err(invalid()),
            };
            let given = |field: &str| Some(payload[field].clone()).filter(|v| !v.is_null());
            details =
                decision_details::details(approved, given("arguments"), message, given("result"))?;
            (approved, approver)
        }
    };
    Ok(Decision {
        approved,
        approver: approver.unwrap_or_else(|| caller.name.clone()),
        by: caller.by(),
        details,
        checked_seq: None,
    })
}
