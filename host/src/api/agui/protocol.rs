//! The AG-UI wire types agenthost speaks (docs/ag-ui.md): the run input a
//! client POSTs (`RunAgentInput`, the fields we read) and the events we
//! send, with AG-UI's own names (`type` in SCREAMING_SNAKE_CASE, fields in
//! camelCase). Only the events the journal maps to are here; what we add
//! of our own goes under `metadata.agenthost`, where AG-UI allows it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::journal::payloads::{StartReason, ToolStatus};

/// Longest `threadId` accepted (in characters): it names a session.
pub(crate) const MAX_THREAD_ID: usize = 256;

/// AG-UI's `RunAgentInput`: a run on a thread. The newest `user` message is
/// the turn's input; `resume` answers the interrupt a previous run ended with.
/// `tools`, `context`, `state` and `forwardedProps` are accepted and not
/// used (the agent has its own tools and the session its own history):
/// they are fields here for the document (`GET /openapi.json`).
#[allow(dead_code)]
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunAgentInput {
    /// Names the session (docs/ag-ui.md, "Threads").
    #[schema(min_length = 1, max_length = 256)]
    pub thread_id: String,
    /// Names the run in this response's RUN_STARTED and RUN_FINISHED.
    pub run_id: String,
    pub messages: Vec<InputMessage>,
    #[serde(default)]
    pub tools: Vec<Value>,
    #[serde(default)]
    pub context: Vec<Value>,
    #[serde(default)]
    pub state: Option<Value>,
    #[serde(default)]
    pub forwarded_props: Option<Value>,
    #[serde(default)]
    pub parent_run_id: Option<String>,
    #[serde(default)]
    pub protocol_version: Option<String>,
    /// Answers to the interrupts of the thread's previous run.
    #[serde(default)]
    pub resume: Option<Vec<ResumeEntry>>,
}

/// A message of the conversation as the client keeps it. Only `user`
/// messages are read, and only the newest one.
#[allow(dead_code)]
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub(crate) struct InputMessage {
    pub id: String,
    /// `user`, `assistant`, `tool`, `system`, `developer`, ...
    pub role: String,
    /// Text, or (user messages) an array of parts whose `text` parts are read.
    #[serde(default)]
    pub content: Option<Value>,
}

/// The answer to one interrupt.
#[allow(dead_code)]
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResumeEntry {
    pub interrupt_id: String,
    pub status: ResumeStatus,
    /// For `resolved`: `{"approved": bool, "approver"?: string, "arguments"?,
    /// "message"?: string, "result"?}` (docs/approvals.md, "Richer decisions").
    #[serde(default)]
    pub payload: Option<Value>,
    #[serde(default)]
    pub metadata: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ResumeStatus {
    Resolved,
    Cancelled,
}

/// One AG-UI event, as sent in the `data:` of an SSE frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum AgUiEvent {
    RunStarted(RunStarted),
    RunFinished(RunFinished),
    RunError(RunError),
    TextMessageStart(TextMessageStart),
    TextMessageContent(TextMessageContent),
    TextMessageEnd(TextMessageEnd),
    ToolCallStart(ToolCallStart),
    ToolCallArgs(ToolCallArgs),
    ToolCallEnd(ToolCallEnd),
    ToolCallResult(ToolCallResult),
    Custom(Custom),
}

impl AgUiEvent {
    /// Whether the event ends its run.
    pub(crate) fn ends_run(&self) -> bool {
        matches!(self, AgUiEvent::RunFinished(_) | AgUiEvent::RunError(_))
    }
}

/// `metadata` of our events: everything of ours is under `agenthost`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct Metadata {
    pub agenthost: HostMetadata,
}

/// What agenthost adds to an AG-UI event; each event sets its own fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct HostMetadata {
    /// RUN_STARTED, RUN_ERROR, interrupts: the session the thread names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Uuid>,
    /// RUN_STARTED, RUN_ERROR: the session's turn this run is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// RUN_STARTED: why the turn started (a new input, or a decision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<StartReason>,
    /// TEXT_MESSAGE_END: the host closed the message at the end of its turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<bool>,
    /// TOOL_CALL_RESULT: how the call ended (`ok`, `error`, `denied`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolStatus>,
    /// TOOL_CALL_RESULT, interrupts: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Interrupts: the proposed arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// Interrupts: what gates the tool (`code`, `manifest`, `policy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gated_by: Option<Vec<String>>,
}

impl HostMetadata {
    pub(crate) fn wrap(self) -> Option<Metadata> {
        Some(Metadata { agenthost: self })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunStarted {
    pub thread_id: String,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunFinished {
    pub thread_id: String,
    pub run_id: String,
    pub outcome: Outcome,
}

/// How a run that did not fail ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Outcome {
    Success,
    /// The run waits for a decision: resume it with `resume` in the next run.
    Interrupt {
        interrupts: Vec<Interrupt>,
    },
}

/// A gated tool call waiting for a decision (AG-UI reason `tool_call`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Interrupt {
    /// The id of the journal's TOOL_APPROVAL_REQUIRED event.
    pub id: String,
    /// Always `tool_call`.
    pub reason: String,
    /// The agent's reason for the call, or a question naming the tool.
    pub message: String,
    pub tool_call_id: String,
    /// What `resume[].payload` takes: `{"approved": bool, "approver"?: string}`.
    pub response_schema: Value,
    /// When the call is denied by `timeout` (the approval's time-to-live);
    /// a resume after it is refused with RUN_ERROR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    pub metadata: Metadata,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunError {
    pub message: String,
    /// A TURN_ERROR kind (`agent_error`, `deadline`, ...), or an API error
    /// code when the run could not start (`conflict`, ...).
    pub code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TextMessageStart {
    pub message_id: String,
    /// `assistant`, or `user` (the events endpoint replays user messages).
    pub role: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TextMessageContent {
    pub message_id: String,
    pub delta: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TextMessageEnd {
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolCallStart {
    pub tool_call_id: String,
    pub tool_call_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolCallArgs {
    pub tool_call_id: String,
    /// The whole arguments, as JSON text.
    pub delta: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolCallEnd {
    pub tool_call_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolCallResult {
    /// `msg_` and the journal event's id in 32 hex digits.
    pub message_id: String,
    pub tool_call_id: String,
    /// The tool's output, as JSON text.
    pub content: String,
    /// Always `tool`.
    pub role: String,
    pub metadata: Metadata,
}

/// A journal event AG-UI has no event for (`HTTP_REQUEST`, ...), inside its run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct Custom {
    /// `agenthost.` and the journal event's type, e.g. `agenthost.HTTP_REQUEST`.
    pub name: String,
    /// The journal event's payload.
    pub value: Value,
}
