//! One type per event payload, each bound to its event type (`Payload::TYPE`),
//! so a payload cannot be written under the wrong type: events are made with
//! `NewEvent::of(&payload)`. The JSON these types write is the wire format of
//! docs/events.md, a compatibility contract pinned by the golden files in
//! `tests/golden/events/` (`golden_tests.rs`).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::EventType;

/// An event payload and the one event type it is written under.
pub trait Payload: Serialize {
    const TYPE: EventType;
}

macro_rules! bind {
    ($($payload:ident => $kind:ident),* $(,)?) => {
        $(impl Payload for $payload {
            const TYPE: EventType = EventType::$kind;
        })*
    };
}

bind! {
    SessionCreated => SessionCreated,
    TurnStarted => TurnStarted,
    MessageStart => MessageStart,
    MessageDelta => MessageDelta,
    MessageEnd => MessageEnd,
    ToolCall => ToolCall,
    ToolResult => ToolResult,
    ToolApprovalRequired => ToolApprovalRequired,
    ToolApprovalGranted => ToolApprovalGranted,
    ToolApprovalDenied => ToolApprovalDenied,
    TurnError => TurnError,
    TurnEnded => TurnEnded,
    SessionEnded => SessionEnded,
    HttpRequest => HttpRequest,
    HttpRequestDenied => HttpRequestDenied,
    HttpResponse => HttpResponse,
    InputQueued => InputQueued,
    TurnScheduled => TurnScheduled,
    TurnScheduleCancelled => TurnScheduleCancelled,
    LlmCall => LlmCall,
    LlmResult => LlmResult,
    BudgetReached => BudgetReached,
}

/// `SESSION_CREATED`: always seq 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct SessionCreated {
    pub app_id: Uuid,
    /// The app's slug.
    pub app: String,
    pub route: String,
    pub deployment_id: Uuid,
    pub deployment_version: u64,
    /// The input exactly as the client sent it (`null` when omitted).
    pub input: Value,
    /// The end user the session belongs to, when one created it (with the
    /// claims the app's `[end_users] claims` lets through).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_user: Option<EndUserInfo>,
}

/// The end user of `SESSION_CREATED`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct EndUserInfo {
    /// The user id (the token's `sub`).
    pub id: String,
    /// The allowed claims of the user's token.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    #[schema(value_type = Object)]
    pub claims: serde_json::Map<String, Value>,
}

/// `TURN_STARTED`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct TurnStarted {
    pub turn: u32,
    pub reason: StartReason,
    /// The turn's input; for an approval decision, the suspended turn's input.
    pub input: Value,
}

/// Why a turn started. Clients ignore kinds they do not know.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum StartReason {
    /// A new input.
    Input,
    /// A decision on a gated call resumes the suspended step.
    ApprovalDecision {
        approved: bool,
        tool_call_id: String,
        approver: String,
    },
    /// A schedule set through the API came due (`docs/schedules.md`).
    Schedule { schedule_id: Uuid },
    /// The session's LLM budget was raised: the turn it paused runs again
    /// with the same input (docs/llm.md "Budgets").
    BudgetRaised,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Role {
    /// Written by the host from a text input.
    User,
    /// Written by the agent.
    Assistant,
}

/// `MESSAGE_START`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct MessageStart {
    /// `msg_` and 32 hex digits.
    pub message_id: String,
    pub role: Role,
}

/// `MESSAGE_DELTA`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MessageDelta {
    pub message_id: String,
    pub delta: Delta,
}

/// A chunk of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta {
    Text { text: String },
}

/// `MESSAGE_END`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct MessageEnd {
    pub message_id: String,
    pub role: Role,
    /// The message's full text (its deltas, concatenated).
    pub text: String,
    /// Only when the host closed the message at the end of its turn:
    /// `true` if the turn failed, `false` if it ended normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<bool>,
}

/// `TOOL_CALL`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct ToolCall {
    pub tool_call_id: String,
    pub name: String,
    pub arguments: Value,
    /// The `[mcp.<name>]` server whose tool this is (named
    /// `<server>__<tool>`): the host calls it and journals its result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_server: Option<String>,
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ToolStatus {
    Ok,
    Error,
    /// Only for a call a human denied.
    Denied,
}

/// `TOOL_RESULT`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct ToolResult {
    pub tool_call_id: String,
    pub name: String,
    pub status: ToolStatus,
    pub output: Value,
}

/// `TOOL_APPROVAL_REQUIRED`: the turn is suspended; its last event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct ToolApprovalRequired {
    pub tool_call_id: String,
    pub name: String,
    pub arguments: Value,
    /// The agent's explanation of the step.
    pub reason: Option<String>,
    /// What gates the tool, in this order: `code`, `manifest`, `policy`.
    pub gated_by: Vec<String>,
    /// When the call is denied by `timeout` unless a human decided first
    /// (RFC 3339); absent when the approval may wait forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// `TOOL_APPROVAL_GRANTED`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct ToolApprovalGranted {
    pub tool_call_id: String,
    pub name: String,
    /// Who decided: the request's `approver`, else the deciding key's name.
    pub approver: String,
    /// The id of the API key that decided.
    pub key_id: String,
    /// The arguments the human approved the call with, instead of the
    /// agent's: the tool runs with these. Absent when not edited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// The agent's arguments, when the human edited them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_arguments: Option<Value>,
    /// The result the human gave in place of the tool's: the tool is not
    /// run and the agent receives this as its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// A note from the human to the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Decided by a webhook's decision link: a keyed hash of the address
    /// it was used from (docs/webhooks.md, "Decision links").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_hash: Option<String>,
}

/// `TOOL_APPROVAL_DENIED`: the fields of `TOOL_APPROVAL_GRANTED` but the
/// edits (`arguments`, `original_arguments`, `result`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct ToolApprovalDenied {
    pub tool_call_id: String,
    pub name: String,
    pub approver: String,
    pub key_id: String,
    /// A note from the human to the agent, for example why it was denied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// As in `TOOL_APPROVAL_GRANTED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_hash: Option<String>,
}

/// Why a turn failed (docs/events.md, "TURN_ERROR kinds"). Clients ignore
/// kinds they do not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnErrorKind {
    AgentError,
    Panic,
    Trap,
    Deadline,
    CpuLimit,
    MemoryLimit,
    InvalidOrder,
    Limit,
    UnansweredToolCall,
    MultipleGatedCalls,
    Storage,
    DeploymentUnavailable,
    MissingSecret,
    HostRestarted,
    Cancelled,
    Internal,
    /// The turn's output passed `limits.max_open_messages` or `limits.max_output_mb`.
    OutputLimit,
}

impl TurnErrorKind {
    /// Every kind, in the order of docs/events.md (new kinds are appended,
    /// so the golden file only grows).
    pub const ALL: [TurnErrorKind; 17] = [
        TurnErrorKind::AgentError,
        TurnErrorKind::Panic,
        TurnErrorKind::Trap,
        TurnErrorKind::Deadline,
        TurnErrorKind::CpuLimit,
        TurnErrorKind::MemoryLimit,
        TurnErrorKind::InvalidOrder,
        TurnErrorKind::Limit,
        TurnErrorKind::UnansweredToolCall,
        TurnErrorKind::MultipleGatedCalls,
        TurnErrorKind::Storage,
        TurnErrorKind::DeploymentUnavailable,
        TurnErrorKind::MissingSecret,
        TurnErrorKind::HostRestarted,
        TurnErrorKind::Cancelled,
        TurnErrorKind::Internal,
        TurnErrorKind::OutputLimit,
    ];

    /// The wire name, e.g. `cpu_limit`.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnErrorKind::AgentError => "agent_error",
            TurnErrorKind::Panic => "panic",
            TurnErrorKind::Trap => "trap",
            TurnErrorKind::Deadline => "deadline",
            TurnErrorKind::CpuLimit => "cpu_limit",
            TurnErrorKind::MemoryLimit => "memory_limit",
            TurnErrorKind::InvalidOrder => "invalid_order",
            TurnErrorKind::Limit => "limit",
            TurnErrorKind::UnansweredToolCall => "unanswered_tool_call",
            TurnErrorKind::MultipleGatedCalls => "multiple_gated_calls",
            TurnErrorKind::Storage => "storage",
            TurnErrorKind::DeploymentUnavailable => "deployment_unavailable",
            TurnErrorKind::MissingSecret => "missing_secret",
            TurnErrorKind::HostRestarted => "host_restarted",
            TurnErrorKind::Cancelled => "cancelled",
            TurnErrorKind::Internal => "internal",
            TurnErrorKind::OutputLimit => "output_limit",
        }
    }
}

/// `TURN_ERROR`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct TurnError {
    pub turn: u32,
    pub kind: TurnErrorKind,
    /// Human-readable, at most 4096 bytes.
    pub message: String,
}

/// `TURN_ENDED`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct TurnEnded {
    pub turn: u32,
}

/// `SESSION_ENDED`: the session's last event.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct SessionEnded {
    /// Why an operator or client ended it (`POST /sessions/{id}/end`);
    /// absent when the agent ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The key that ended it, with `reason`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
}

/// `HTTP_REQUEST`: committed before the request leaves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct HttpRequest {
    /// `http_<turn>_<n>`.
    pub request_id: String,
    pub method: String,
    /// `scheme://host[:port]`.
    pub origin: String,
    /// The path, without the query string, secrets redacted.
    pub path: String,
}

/// `HTTP_REQUEST_DENIED`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct HttpRequestDenied {
    pub request_id: String,
    pub method: String,
    pub origin: String,
    pub path: String,
    /// Why the host refused.
    pub reason: String,
}

/// `HTTP_RESPONSE`: how a request that left ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct HttpResponse {
    pub request_id: String,
    /// `null` when no response head arrived.
    pub status: Option<u16>,
    /// `null` when the body was read to its end.
    pub error: Option<String>,
    /// From the commit of `HTTP_REQUEST` to the end, one decimal.
    pub duration_ms: f64,
    /// Response body bytes the agent received.
    pub bytes: u64,
}

/// `INPUT_QUEUED`: an input sent with `on_busy` `enqueue` or `interrupt`
/// while the session was busy; it runs as a later turn of its own, whose
/// TURN_STARTED carries it again (docs/api.md, "Input while a turn runs").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct InputQueued {
    /// `inq_` and 32 hex digits.
    pub input_id: String,
    /// The input exactly as the client sent it.
    pub input: Value,
    /// `true` for `on_busy` `interrupt`: the running turn is cancelled and
    /// this input runs next, before inputs queued earlier.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupt: bool,
    /// Inputs queued before it runs, counted from 1 (1: it runs next).
    pub position: u32,
}

/// `TURN_SCHEDULED`: the agent scheduled an input as a later turn of its
/// session (`schedule` of `wit/agent.wit`); journaled in the turn's final
/// commit, just before its TURN_ENDED (or TOOL_APPROVAL_REQUIRED), so only
/// a turn that ends well schedules (docs/schedules.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct TurnScheduled {
    /// The schedule's id, as `GET /sessions/{id}/schedules` lists it and
    /// the TURN_STARTED it starts names it.
    pub schedule_id: Uuid,
    /// When it is due, RFC 3339 in UTC, to the millisecond.
    pub at: String,
    /// The input the later turn gets.
    pub input: Value,
}

/// `TURN_SCHEDULE_CANCELLED`: the agent cancelled a schedule of its session
/// made before this turn (`cancel-schedule`); journaled in the turn's final
/// commit, like TURN_SCHEDULED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct TurnScheduleCancelled {
    pub schedule_id: Uuid,
}

/// `LLM_CALL`: the host is about to send a completion request to a declared
/// model (`[llm.<alias>]`, docs/llm.md); committed before the request
/// leaves. Each request is its own LLM_CALL (a fallback's too), followed
/// by its LLM_RESULT.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct LlmCall {
    /// `llm_<turn>_<n>`.
    pub call_id: String,
    /// The alias whose endpoint is called.
    pub alias: String,
    /// `openai` or `anthropic`.
    pub provider: String,
    pub model: String,
}

/// The tokens of one completion, as the provider counted them (0 when it
/// did not say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct LlmUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// `LLM_RESULT`: how the request of an LLM_CALL ended. What the model said
/// is in the MESSAGE_* events it streamed into and the TOOL_CALLs the agent
/// handed over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct LlmResult {
    pub call_id: String,
    pub usage: LlmUsage,
    /// `stop`, `length`, `tool_calls`, `content_filter`, or `error`.
    pub finish_reason: String,
    /// In the unit of the alias's `price`, when it declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// The alias that answered; absent when the request failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_by: Option<String>,
    /// Why the request failed (a status, a connection error, a cut stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `BUDGET_REACHED`: a declared-model call the LLM budget cannot cover;
/// nothing was sent, and the turn ends here with the session
/// `paused_budget` until the budget is raised (docs/llm.md "Budgets").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct BudgetReached {
    /// The LLM_CALL id the refused request would have had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// `session` (the only scope so far).
    pub scope: String,
    /// `tokens` or `cost`: the unit of the numbers below.
    pub unit: String,
    pub limit: f64,
    /// Spent by settled calls (and worst cases of calls that never reported).
    pub spent: f64,
    /// Held by calls not settled yet.
    pub reserved: f64,
    /// The refused call's worst case.
    pub needed: f64,
}
