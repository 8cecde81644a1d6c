//! `tools/call`: runs a turn of the tool's app and route, in a new session
//! or the one `session_id` names, through the same writer commands as
//! `POST /sessions` and `POST /sessions/{id}/input` (the writer starts the
//! turn). The answer is an SSE stream: the agent's deltas as
//! `notifications/progress` when the call carries a `progressToken`, then
//! the result, read from the journal as the events endpoint reads it.

use axum::http::{HeaderValue, StatusCode};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::rpc;
use super::tools::{self, Tool};
use crate::api::caller::Caller;
use crate::api::turns::{self, Target};
use crate::api::{ApiError, AppState, ErrorCode, overload};
use crate::journal::payloads::{self, Delta, Role};
use crate::journal::{EventType, StoredEvent};
use crate::store::OnBusy;

/// Keep-alive comment interval while a turn runs.
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// What a call asks for, read from its `params`.
struct Call {
    tool: Tool,
    input: Value,
    session: Option<Uuid>,
    progress_token: Option<Value>,
}

pub(super) async fn call(
    state: AppState,
    caller: Caller,
    id: Value,
    params: Map<String, Value>,
) -> Result<Response, ApiError> {
    let call = match read(&state, &caller, &params).await? {
        Ok(call) => call,
        Err(message) => return Ok(invalid(&id, message)),
    };
    state.refuse_if_shutting_down()?;
    if let Some(refused) = overload::overloaded(&state) {
        return Ok(refused);
    }
    let Call {
        tool,
        input,
        session,
        progress_token,
    } = call;
    let target = match session {
        None => Target::New {
            app: tool.app_id.to_string(),
            route: tool.route.clone(),
        },
        Some(session) => {
            let record = caller.session(&state, &session.to_string()).await;
            match record {
                Ok(record) if record.app_id == tool.app_id && record.route == tool.route => {
                    Target::Session {
                        id: record.id,
                        on_busy: OnBusy::Reject,
                    }
                }
                Ok(_)
                | Err(ApiError {
                    status: StatusCode::NOT_FOUND,
                    ..
                }) => {
                    return Ok(invalid(
                        &id,
                        format!("`session_id`: no session `{session}` of this tool"),
                    ));
                }
                Err(err) => return Err(err),
            }
        }
    };
    let started = match turns::start(&state, &caller, target, input, None).await {
        Ok(started) => started,
        // The session's state refuses the input (a turn running, an
        // approval pending, the session ended): the model can read why.
        Err(err) if err.code == ErrorCode::Conflict => {
            let message = err.message;
            let text = format!("the session cannot take this input: {message}");
            let result = json!({
                "content": [{"type": "text", "text": text}],
                "structuredContent": {"session_id": session, "outcome": "refused", "error": {"kind": "conflict", "message": message}},
                "isError": true,
            });
            return Ok(rpc::json_response(&rpc::result(&id, result)));
        }
        Err(err) => return Err(err),
    };
    // Without a key, a turn started now: SESSION_CREATED is seq 0, a new
    // session's first TURN_STARTED seq 1.
    let started_seq = started.started_seq.unwrap_or(1);
    Ok(stream(
        state,
        &caller,
        id,
        (started.session, started.turn, started_seq),
        progress_token,
    )
    .await)
}

/// An invalid call: JSON-RPC's invalid params, as MCP asks for an unknown
/// tool or bad arguments.
fn invalid(id: &Value, message: impl Into<String>) -> Response {
    rpc::json_response(&rpc::error(id, rpc::INVALID_PARAMS, message))
}

/// The call's tool and arguments, or why they are invalid.
async fn read(
    state: &AppState,
    caller: &Caller,
    params: &Map<String, Value>,
) -> Result<Result<Call, String>, ApiError> {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Ok(Err("`name` must be a tool's name".into()));
    };
    // Another app's tool does not exist for an invocation key or end user.
    let Some(tool) = tools::find(state, caller, name).await? else {
        return Ok(Err(format!("unknown tool `{name}`")));
    };
    let empty = Map::new();
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(arguments)) => arguments,
        Some(_) => return Ok(Err("`arguments` must be an object".into())),
    };
    let input = match &tool.input_schema {
        // The manifest's schema: the arguments are the input (the agent
        // checks them; the host does not validate against the schema).
        Some(_) => {
            let mut input = arguments.clone();
            input.remove("session_id");
            Value::Object(input)
        }
        None => {
            if let Some(other) = (arguments.keys()).find(|k| *k != "message" && *k != "session_id")
            {
                return Ok(Err(format!(
                    "unknown argument `{other}`: give `message` and, to continue a session, `session_id`"
                )));
            }
            let Some(message) = arguments.get("message").and_then(Value::as_str) else {
                return Ok(Err("`message` must be a string: the turn's input".into()));
            };
            Value::String(message.to_string())
        }
    };
    // PostgreSQL cannot store a NUL (docs/api.md).
    if crate::util::json_has_nul(&input.to_string()) {
        return Ok(Err("the arguments must not hold a NUL character".into()));
    }
    let session = match arguments.get("session_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(raw)) => match Uuid::parse_str(raw) {
            Ok(id) => Some(id),
            Err(_) => return Ok(Err(format!("`session_id`: `{raw}` is not a session id"))),
        },
        Some(_) => return Ok(Err("`session_id` must be a string".into())),
    };
    let progress_token = (params.get("_meta"))
        .and_then(|meta| meta.get("progressToken"))
        .filter(|token| token.is_string() || token.is_number())
        .cloned();
    Ok(Ok(Call {
        tool,
        input,
        session,
        progress_token,
    }))
}

/// Streams the turn from its TURN_STARTED to its end: progress, then the result.
async fn stream(
    state: AppState,
    caller: &Caller,
    id: Value,
    (session, turn, started_seq): (Uuid, u32, u64),
    progress_token: Option<Value>,
) -> Response {
    let mut turn_reader = TurnReader {
        id,
        session,
        turn,
        progress_token,
        progress: 0,
        assistant: None,
        last_message: None,
    };
    let framer = move |event: &StoredEvent| {
        let (messages, end) = turn_reader.read(event);
        (messages.iter().map(rpc::frame).collect(), end)
    };
    let frames = match turns::follow(state, caller, session, started_seq, framer).await {
        Ok(frames) => frames,
        Err(err) => return err.into_response(),
    };
    let mut response = Sse::new(frames)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    (response.headers_mut()).insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Reads one turn's events into MCP messages.
struct TurnReader {
    /// The call's request id.
    id: Value,
    session: Uuid,
    turn: u32,
    progress_token: Option<Value>,
    /// Progress notifications sent (MCP's `progress` must increase).
    progress: u64,
    /// The assistant message being streamed.
    assistant: Option<String>,
    /// The text of the turn's last assistant message so far.
    last_message: Option<String>,
}

impl TurnReader {
    /// The messages of one journal event, and whether the call's stream ends.
    fn read(&mut self, event: &StoredEvent) -> (Vec<Value>, bool) {
        match event.kind() {
            Some(EventType::MessageStart) => {
                if let Some(p) = event.payload::<payloads::MessageStart>().ok().flatten()
                    && p.role == Role::Assistant
                {
                    self.assistant = Some(p.message_id);
                }
                (Vec::new(), false)
            }
            Some(EventType::MessageDelta) => {
                let Some(token) = &self.progress_token else {
                    return (Vec::new(), false);
                };
                let Some(p) = event.payload::<payloads::MessageDelta>().ok().flatten() else {
                    return (Vec::new(), false);
                };
                if self.assistant.as_ref() != Some(&p.message_id) {
                    return (Vec::new(), false);
                }
                let Delta::Text { text } = p.delta;
                self.progress += 1;
                let params =
                    json!({"progressToken": token, "progress": self.progress, "message": text});
                (
                    vec![rpc::notification("notifications/progress", params)],
                    false,
                )
            }
            Some(EventType::MessageEnd) => {
                if let Some(p) = event.payload::<payloads::MessageEnd>().ok().flatten()
                    && p.role == Role::Assistant
                {
                    self.last_message = Some(p.text);
                    self.assistant = None;
                }
                (Vec::new(), false)
            }
            Some(EventType::TurnEnded) => (vec![self.completed()], true),
            Some(EventType::TurnError) => {
                let (kind, message) = match event.payload::<payloads::TurnError>().ok().flatten() {
                    Some(p) => (p.kind.as_str(), p.message),
                    None => ("internal", "the turn failed".to_string()),
                };
                (vec![self.failed(kind, &message)], true)
            }
            Some(EventType::ToolApprovalRequired) => {
                match (event.payload::<payloads::ToolApprovalRequired>().ok()).flatten() {
                    Some(p) => (vec![self.pending(event.id, p)], true),
                    None => (vec![self.failed("internal", "unreadable approval")], true),
                }
            }
            // The turn's end comes first; a stream that meets it anyway ends.
            Some(EventType::SessionEnded) => (vec![self.completed()], true),
            _ => (Vec::new(), false),
        }
    }

    fn answer(&self, result: Value) -> Value {
        rpc::result(&self.id, result)
    }

    fn completed(&self) -> Value {
        let text = self.last_message.clone().unwrap_or_default();
        self.answer(json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": {
                "session_id": self.session, "turn": self.turn,
                "outcome": "completed", "message": text,
            },
            "isError": false,
        }))
    }

    fn failed(&self, kind: &str, message: &str) -> Value {
        self.answer(json!({
            "content": [{"type": "text", "text": format!("the agent's turn failed ({kind}): {message}")}],
            "structuredContent": {
                "session_id": self.session, "turn": self.turn, "outcome": "failed",
                "message": self.last_message, "error": {"kind": kind, "message": message},
            },
            "isError": true,
        }))
    }

    fn pending(&self, event_id: Uuid, p: payloads::ToolApprovalRequired) -> Value {
        let path = format!("/sessions/{}/approval", self.session);
        let text = format!(
            "The agent's call to `{}` with arguments {} waits for a human decision (session {}). Decide it with `POST {path}` and a body {{\"approved\": true}} or {{\"approved\": false}} (a platform key); the session then goes on. Continue the conversation by calling this tool again with this `session_id` once the session is idle.",
            p.name, p.arguments, self.session
        );
        self.answer(json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": {
                "session_id": self.session, "turn": self.turn, "outcome": "approval_pending",
                "message": self.last_message,
                "approval": {
                    "event_id": event_id, "tool_call_id": p.tool_call_id, "tool": p.name,
                    "arguments": p.arguments, "reason": p.reason, "gated_by": p.gated_by,
                    "expires_at": p.expires_at,
                    "decide": {"method": "POST", "path": path, "body": {"approved": true}},
                },
            },
            "isError": false,
        }))
    }
}

/// The messages a call's stream sends, from fixed samples, for the golden
/// files (`api::golden_tests`): they are a contract (docs/mcp.md).
#[cfg(test)]
pub(super) fn golden_samples() -> Vec<(&'static str, Value)> {
    let session = Uuid::parse_str("019aa8e2-7b3c-7d4e-8f10-1234567890ab").unwrap_or_default();
    let event = Uuid::parse_str("019aa8e2-7b3c-7d4e-8f10-abcdef012345").unwrap_or_default();
    let mut reader = TurnReader {
        id: json!(3),
        session,
        turn: 2,
        progress_token: Some(json!("tok")),
        progress: 0,
        assistant: Some("msg_1".into()),
        last_message: Some("Deleting apples.".into()),
    };
    let delta = StoredEvent {
        id: event,
        seq: 5,
        // In the envelope's own order: its `type` before the payload's.
        json: format!(
            r#"{{"id":"{event}","seq":5,"type":"MESSAGE_DELTA","payload":{{"message_id":"msg_1","delta":{{"type":"text","text":"Deleting"}}}}}}"#
        )
        .into(),
    };
    let (progress, _) = reader.read(&delta);
    let approval = payloads::ToolApprovalRequired {
        tool_call_id: "call_2_1".into(),
        name: "delete_record".into(),
        arguments: json!({"name": "apples"}),
        reason: Some("the user asked to delete apples".into()),
        gated_by: vec!["code".into()],
        expires_at: None,
    };
    vec![
        ("progress", progress.into_iter().next().unwrap_or_default()),
        ("completed", reader.completed()),
        ("failed", reader.failed("trap", "the agent trapped")),
        ("approval_pending", reader.pending(event, approval)),
    ]
}
