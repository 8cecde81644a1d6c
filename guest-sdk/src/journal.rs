//! The journal as a guest reads it: every event type's name and its
//! payload's fields (docs/events.md). Generated from the host's event payload types (host/src/journal/payloads.rs) by `cargo test -p agenthost --lib guest_journal`: do not edit; `UPDATE_GOLDEN=1` rewrites it.

use serde::Deserialize;
use serde_json::Value;

/// The event type of [`SessionCreated`].
pub const SESSION_CREATED: &str = "SESSION_CREATED";
/// The event type of [`TurnStarted`].
pub const TURN_STARTED: &str = "TURN_STARTED";
/// The event type of [`MessageStart`].
pub const MESSAGE_START: &str = "MESSAGE_START";
/// The event type of [`MessageDelta`].
pub const MESSAGE_DELTA: &str = "MESSAGE_DELTA";
/// The event type of [`MessageEnd`].
pub const MESSAGE_END: &str = "MESSAGE_END";
/// The event type of [`ToolCall`].
pub const TOOL_CALL: &str = "TOOL_CALL";
/// The event type of [`ToolResult`].
pub const TOOL_RESULT: &str = "TOOL_RESULT";
/// The event type of [`ToolApprovalRequired`].
pub const TOOL_APPROVAL_REQUIRED: &str = "TOOL_APPROVAL_REQUIRED";
/// The event type of [`ToolApprovalGranted`].
pub const TOOL_APPROVAL_GRANTED: &str = "TOOL_APPROVAL_GRANTED";
/// The event type of [`ToolApprovalDenied`].
pub const TOOL_APPROVAL_DENIED: &str = "TOOL_APPROVAL_DENIED";
/// The event type of [`TurnError`].
pub const TURN_ERROR: &str = "TURN_ERROR";
/// The event type of [`TurnEnded`].
pub const TURN_ENDED: &str = "TURN_ENDED";
/// The event type of [`SessionEnded`].
pub const SESSION_ENDED: &str = "SESSION_ENDED";
/// The event type of [`HttpRequest`].
pub const HTTP_REQUEST: &str = "HTTP_REQUEST";
/// The event type of [`HttpRequestDenied`].
pub const HTTP_REQUEST_DENIED: &str = "HTTP_REQUEST_DENIED";
/// The event type of [`HttpResponse`].
pub const HTTP_RESPONSE: &str = "HTTP_RESPONSE";
/// The event type of [`InputQueued`].
pub const INPUT_QUEUED: &str = "INPUT_QUEUED";
/// The event type of [`TurnScheduled`].
pub const TURN_SCHEDULED: &str = "TURN_SCHEDULED";
/// The event type of [`TurnScheduleCancelled`].
pub const TURN_SCHEDULE_CANCELLED: &str = "TURN_SCHEDULE_CANCELLED";
/// The event type of [`LlmCall`].
pub const LLM_CALL: &str = "LLM_CALL";
/// The event type of [`LlmResult`].
pub const LLM_RESULT: &str = "LLM_RESULT";
/// The event type of [`BudgetReached`].
pub const BUDGET_REACHED: &str = "BUDGET_REACHED";

/// `SESSION_CREATED`: always seq 0.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct SessionCreated {
    /// The app's slug.
    pub app: String,
    /// The `app_id` field.
    pub app_id: String,
    /// The `deployment_id` field.
    pub deployment_id: String,
    /// The `deployment_version` field.
    pub deployment_version: u64,
    /// The end user the session belongs to, when one created it (with the claims the app's `[end_users] claims` lets through).
    #[serde(default)]
    pub end_user: Option<Value>,
    /// The input exactly as the client sent it (`null` when omitted).
    pub input: Value,
    /// The `route` field.
    pub route: String,
}

/// `TURN_STARTED`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct TurnStarted {
    /// The turn's input; for an approval decision, the suspended turn's input.
    pub input: Value,
    /// The `reason` field.
    pub reason: Value,
    /// The `turn` field.
    pub turn: u64,
}

/// `MESSAGE_START`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct MessageStart {
    /// `msg_` and 32 hex digits.
    pub message_id: String,
    /// One of `user`, `assistant`.
    pub role: String,
}

/// `MESSAGE_DELTA`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct MessageDelta {
    /// The `delta` field.
    pub delta: Value,
    /// The `message_id` field.
    pub message_id: String,
}

/// `MESSAGE_END`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct MessageEnd {
    /// Only when the host closed the message at the end of its turn: `true` if the turn failed, `false` if it ended normally.
    #[serde(default)]
    pub incomplete: Option<bool>,
    /// The `message_id` field.
    pub message_id: String,
    /// One of `user`, `assistant`.
    pub role: String,
    /// The message's full text (its deltas, concatenated).
    pub text: String,
}

/// `TOOL_CALL`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct ToolCall {
    /// The `arguments` field.
    pub arguments: Value,
    /// The `[mcp.<name>]` server whose tool this is (named `<server>__<tool>`): the host calls it and journals its result.
    #[serde(default)]
    pub mcp_server: Option<String>,
    /// The `name` field.
    pub name: String,
    /// The `tool_call_id` field.
    pub tool_call_id: String,
}

/// `TOOL_RESULT`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct ToolResult {
    /// The `name` field.
    pub name: String,
    /// The `output` field.
    pub output: Value,
    /// One of `ok`, `error`, `denied`.
    pub status: String,
    /// The `tool_call_id` field.
    pub tool_call_id: String,
}

/// `TOOL_APPROVAL_REQUIRED`: the turn is suspended; its last event.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct ToolApprovalRequired {
    /// The `arguments` field.
    pub arguments: Value,
    /// When the call is denied by `timeout` unless a human decided first (RFC 3339); absent when the approval may wait forever.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// What gates the tool, in this order: `code`, `manifest`, `policy`.
    pub gated_by: Vec<String>,
    /// The `name` field.
    pub name: String,
    /// The agent's explanation of the step.
    #[serde(default)]
    pub reason: Option<String>,
    /// The `tool_call_id` field.
    pub tool_call_id: String,
}

/// `TOOL_APPROVAL_GRANTED`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct ToolApprovalGranted {
    /// Decided by a webhook's decision link: a keyed hash of the address it was used from (docs/webhooks.md, "Decision links").
    #[serde(default)]
    pub address_hash: Option<String>,
    /// Who decided: the request's `approver`, else the deciding key's name.
    pub approver: String,
    /// The arguments the human approved the call with, instead of the agent's: the tool runs with these. Absent when not edited.
    #[serde(default)]
    pub arguments: Value,
    /// The id of the API key that decided.
    pub key_id: String,
    /// A note from the human to the agent.
    #[serde(default)]
    pub message: Option<String>,
    /// The `name` field.
    pub name: String,
    /// The agent's arguments, when the human edited them.
    #[serde(default)]
    pub original_arguments: Value,
    /// The result the human gave in place of the tool's: the tool is not run and the agent receives this as its output.
    #[serde(default)]
    pub result: Value,
    /// The `tool_call_id` field.
    pub tool_call_id: String,
}

/// `TOOL_APPROVAL_DENIED`: the fields of `TOOL_APPROVAL_GRANTED` but the edits (`arguments`, `original_arguments`, `result`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct ToolApprovalDenied {
    /// As in `TOOL_APPROVAL_GRANTED`.
    #[serde(default)]
    pub address_hash: Option<String>,
    /// The `approver` field.
    pub approver: String,
    /// The `key_id` field.
    pub key_id: String,
    /// A note from the human to the agent, for example why it was denied.
    #[serde(default)]
    pub message: Option<String>,
    /// The `name` field.
    pub name: String,
    /// The `tool_call_id` field.
    pub tool_call_id: String,
}

/// `TURN_ERROR`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct TurnError {
    /// One of `agent_error`, `panic`, `trap`, `deadline`, `cpu_limit`, `memory_limit`, `invalid_order`, `limit`, `unanswered_tool_call`, `multiple_gated_calls`, `storage`, `deployment_unavailable`, `missing_secret`, `host_restarted`, `cancelled`, `internal`, `output_limit`.
    pub kind: String,
    /// Human-readable, at most 4096 bytes.
    pub message: String,
    /// The `turn` field.
    pub turn: u64,
}

/// `TURN_ENDED`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct TurnEnded {
    /// The `turn` field.
    pub turn: u64,
}

/// `SESSION_ENDED`: the session's last event.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct SessionEnded {
    /// The key that ended it, with `reason`.
    #[serde(default)]
    pub key_id: Option<String>,
    /// Why an operator or client ended it (`POST /sessions/{id}/end`); absent when the agent ended it.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `HTTP_REQUEST`: committed before the request leaves.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct HttpRequest {
    /// The `method` field.
    pub method: String,
    /// `scheme://host[:port]`.
    pub origin: String,
    /// The path, without the query string, secrets redacted.
    pub path: String,
    /// `http_<turn>_<n>`.
    pub request_id: String,
}

/// `HTTP_REQUEST_DENIED`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct HttpRequestDenied {
    /// The `method` field.
    pub method: String,
    /// The `origin` field.
    pub origin: String,
    /// The `path` field.
    pub path: String,
    /// Why the host refused.
    pub reason: String,
    /// The `request_id` field.
    pub request_id: String,
}

/// `HTTP_RESPONSE`: how a request that left ended.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct HttpResponse {
    /// Response body bytes the agent received.
    pub bytes: u64,
    /// From the commit of `HTTP_REQUEST` to the end, one decimal.
    pub duration_ms: f64,
    /// `null` when the body was read to its end.
    #[serde(default)]
    pub error: Option<String>,
    /// The `request_id` field.
    pub request_id: String,
    /// `null` when no response head arrived.
    #[serde(default)]
    pub status: Option<u64>,
}

/// `INPUT_QUEUED`: an input sent with `on_busy` `enqueue` or `interrupt` while the session was busy; it runs as a later turn of its own, whose TURN_STARTED carries it again (docs/api.md, "Input while a turn runs").
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct InputQueued {
    /// The input exactly as the client sent it.
    pub input: Value,
    /// `inq_` and 32 hex digits.
    pub input_id: String,
    /// `true` for `on_busy` `interrupt`: the running turn is cancelled and this input runs next, before inputs queued earlier.
    #[serde(default)]
    pub interrupt: Option<bool>,
    /// Inputs queued before it runs, counted from 1 (1: it runs next).
    pub position: u64,
}

/// `TURN_SCHEDULED`: the agent scheduled an input as a later turn of its session (`schedule` of `wit/agent.wit`); journaled in the turn's final commit, just before its TURN_ENDED (or TOOL_APPROVAL_REQUIRED), so only a turn that ends well schedules (docs/schedules.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct TurnScheduled {
    /// When it is due, RFC 3339 in UTC, to the millisecond.
    pub at: String,
    /// The input the later turn gets.
    pub input: Value,
    /// The schedule's id, as `GET /sessions/{id}/schedules` lists it and the TURN_STARTED it starts names it.
    pub schedule_id: String,
}

/// `TURN_SCHEDULE_CANCELLED`: the agent cancelled a schedule of its session made before this turn (`cancel-schedule`); journaled in the turn's final commit, like TURN_SCHEDULED.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct TurnScheduleCancelled {
    /// The `schedule_id` field.
    pub schedule_id: String,
}

/// `LLM_CALL`: the host is about to send a completion request to a declared model (`[llm.<alias>]`, docs/llm.md); committed before the request leaves. Each request is its own LLM_CALL (a fallback's too), followed by its LLM_RESULT.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct LlmCall {
    /// The alias whose endpoint is called.
    pub alias: String,
    /// `llm_<turn>_<n>`.
    pub call_id: String,
    /// The `model` field.
    pub model: String,
    /// `openai` or `anthropic`.
    pub provider: String,
}

/// `LLM_RESULT`: how the request of an LLM_CALL ended. What the model said is in the MESSAGE_* events it streamed into and the TOOL_CALLs the agent handed over.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct LlmResult {
    /// The `call_id` field.
    pub call_id: String,
    /// In the unit of the alias's `price`, when it declares one.
    #[serde(default)]
    pub cost: Option<f64>,
    /// Why the request failed (a status, a connection error, a cut stream).
    #[serde(default)]
    pub error: Option<String>,
    /// `stop`, `length`, `tool_calls`, `content_filter`, or `error`.
    pub finish_reason: String,
    /// The alias that answered; absent when the request failed.
    #[serde(default)]
    pub served_by: Option<String>,
    /// The `usage` field.
    pub usage: Value,
}

/// `BUDGET_REACHED`: a declared-model call the LLM budget cannot cover; nothing was sent, and the turn ends here with the session `paused_budget` until the budget is raised (docs/llm.md "Budgets").
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct BudgetReached {
    /// The LLM_CALL id the refused request would have had.
    #[serde(default)]
    pub call_id: Option<String>,
    /// The `limit` field.
    pub limit: f64,
    /// The refused call's worst case.
    pub needed: f64,
    /// Held by calls not settled yet.
    pub reserved: f64,
    /// `session` (the only scope so far).
    pub scope: String,
    /// Spent by settled calls (and worst cases of calls that never reported).
    pub spent: f64,
    /// `tokens` or `cost`: the unit of the numbers below.
    pub unit: String,
}
