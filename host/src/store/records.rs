//! The records kept besides events: apps, deployments, sessions, API keys,
//! secrets, the first answers of idempotent requests, the approvals feed.
//!
//! Stored as JSON; fields are only ever added (with `#[serde(default)]`), never
//! renamed or removed, so old data dirs stay readable.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppRecord {
    pub id: Uuid,
    pub slug: String,
    pub created_at: String,
    /// The deployment new sessions pin to.
    #[serde(default)]
    pub current_deployment: Option<Uuid>,
    /// Schedules that create a new session at each firing, soonest first
    /// (`store::domain::app_schedules`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<ScheduleRecord>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentStatus {
    Building,
    Active,
    Failed,
    Retired,
}

/// One tool as described by the agent at build time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    pub needs_approval: bool,
}

/// What the agent's `describe` returned, validated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentDescription {
    pub routes: Vec<String>,
    pub tools: Vec<ToolInfo>,
}

/// The files a successful build leaves in the data dir, with their hashes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Artifact {
    pub component_sha256: String,
    pub artifact_sha256: String,
    /// Fingerprint of the engine that compiled the artifact.
    pub engine: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeploymentRecord {
    pub id: Uuid,
    pub app_id: Uuid,
    pub version: u64,
    pub status: DeploymentStatus,
    pub created_at: String,
    #[serde(default)]
    pub finished_at: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    /// The uploaded manifest, verbatim.
    pub manifest: String,
    pub entry: String,
    #[serde(default)]
    pub description: Option<AgentDescription>,
    #[serde(default)]
    pub artifact: Option<Artifact>,
    /// Tools the manifest gates (`[tools.<name>] needs_approval = true`).
    #[serde(default)]
    pub manifest_gated: Vec<String>,
    /// The operator's `SERVICE_APPROVAL_POLICY`: tool names that always need approval.
    #[serde(default)]
    pub approval_policy: Vec<String>,
    /// The secrets the manifest declares, injected into the agent's environment.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// The manifest's `[limits]` (unset: the defaults).
    #[serde(default)]
    pub limits: LimitsRecord,
    /// The manifest's `[outbound] allow`: origins the agent may call.
    #[serde(default)]
    pub outbound: Vec<String>,
    /// The manifest's `[end_users]` table, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_users: Option<EndUsersRecord>,
    /// Tools whose calls the session's end user may decide
    /// (`[tools.<name>] approver = "end_user"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub end_user_approvals: Vec<String>,
    /// The manifest's `[llm] budget_per_session`: every new session's LLM budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_budget: Option<Budget>,
}

/// An app's end-user policy (`[end_users]`, docs/end-users.md). Lenient
/// on read; the manifest parser is strict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EndUsersRecord {
    /// The bare invocation key may no longer create or touch sessions.
    #[serde(default)]
    pub required: bool,
    /// The token claims that reach the journal and the agent.
    #[serde(default)]
    pub claims: Vec<String>,
    /// The app's own identity provider, if it has one.
    #[serde(default)]
    pub jwks_url: Option<String>,
    #[serde(default)]
    pub issuer: Option<String>,
    #[serde(default)]
    pub audience: Option<String>,
    /// Open sessions one end user may have (none: no cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_open_sessions_per_user: Option<u64>,
    /// Turns one end user may start in any 60 s (none: no cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns_per_minute_per_user: Option<u64>,
    /// The session's own end user may set one-shot schedules on it
    /// (`POST /sessions/{id}/schedules`; docs/schedules.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub schedules: bool,
}

/// Per-turn limits a manifest set; `None` keeps the default. Lenient on
/// read (a newer version may add limits); the manifest parser is strict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LimitsRecord {
    #[serde(default)]
    pub wall_clock_secs: Option<u64>,
    #[serde(default)]
    pub cpu_fuel: Option<u64>,
    #[serde(default)]
    pub memory_mb: Option<u64>,
    #[serde(default)]
    pub max_events: Option<u64>,
    /// Messages a turn may have open at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_open_messages: Option<u64>,
    /// MiB of events a turn may write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_mb: Option<u64>,
    /// How long an approval may wait before it is denied by `timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_timeout_secs: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// A turn is scheduled or running.
    Running,
    /// Between turns, ready for input.
    Idle,
    /// Suspended on a gated tool call.
    AwaitingApproval,
    /// The last turn ended with TURN_ERROR; ready for input.
    Errored,
    /// SESSION_ENDED was journaled; no more input.
    Ended,
    /// Suspended on a declared-model call its LLM budget cannot cover
    /// (BUDGET_REACHED); raising the budget resumes it.
    PausedBudget,
}

impl SessionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Running => "running",
            SessionStatus::Idle => "idle",
            SessionStatus::AwaitingApproval => "awaiting_approval",
            SessionStatus::Errored => "errored",
            SessionStatus::Ended => "ended",
            SessionStatus::PausedBudget => "paused_budget",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            SessionStatus::Running,
            SessionStatus::Idle,
            SessionStatus::AwaitingApproval,
            SessionStatus::Errored,
            SessionStatus::Ended,
            SessionStatus::PausedBudget,
        ]
        .into_iter()
        .find(|status| status.as_str() == s)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: Uuid,
    pub app_id: Uuid,
    pub app_slug: String,
    pub route: String,
    pub deployment_id: Uuid,
    pub deployment_version: u64,
    pub status: SessionStatus,
    /// The number of the latest turn (1 for the first).
    pub turn: u32,
    pub created_at: String,
    pub updated_at: String,
    /// The process (boot id) that scheduled the running turn.
    #[serde(default)]
    pub boot_id: Option<Uuid>,
    /// The gated call the session waits on (status `awaiting_approval`).
    #[serde(default)]
    pub pending_approval: Option<PendingApproval>,
    /// While a resumed turn runs: the decision it resumes from.
    #[serde(default)]
    pub resume: Option<ResumeRecord>,
    /// The end user who owns the session (created with their token); only
    /// they and platform keys reach it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_user: Option<String>,
    /// The source address (an IPv6 address by its /64) of the bare
    /// invocation key that created the session: whose share of the app's
    /// frontend caps it counts against (`domain::quotas`). `None` for
    /// every other creator, and for sessions from before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Inputs waiting for the session's next turns, in the order they run
    /// (`on_busy` `enqueue` or `interrupt`; `store::domain::queue`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queued: Vec<QueuedInput>,
    /// Inputs the session gets at a time set through the API, soonest
    /// first (`store::domain::schedules`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<ScheduleRecord>,
    /// Bytes of the session's journal (its events' JSON payloads) as of
    /// this record's last save: a running turn's own events count from its
    /// end (`--max-session-journal-mb`, `domain::journal_cap`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub journal_bytes: u64,
    /// The session's own LLM budget (`PATCH /sessions/{id}`); when absent
    /// the manifest's `[llm] budget_per_session` applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// What its declared-model calls spent and hold reserved
    /// (`store::domain::budgets`).
    #[serde(default, skip_serializing_if = "LlmSpend::is_empty")]
    pub llm: LlmSpend,
    /// The call the budget could not cover (status `paused_budget`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_pause: Option<BudgetPause>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A spend limit on declared-model calls: `{ tokens = N }` (input plus
/// output tokens) or `{ cost = X }` (money, through the aliases' `price`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

impl Budget {
    /// Exactly one of `tokens` (1 or more) and `cost` (a number above 0).
    pub fn check(&self) -> Result<(), String> {
        match (self.tokens, self.cost) {
            (Some(0), None) => Err("`tokens` must be 1 or more".into()),
            (Some(_), None) => Ok(()),
            (None, Some(cost)) if !cost.is_finite() || cost <= 0.0 => {
                Err("`cost` must be a number above 0".into())
            }
            (None, Some(_)) => Ok(()),
            _ => Err("set exactly one of `tokens` and `cost`".into()),
        }
    }
}

/// A call's share of a budget: tokens, and money when the alias has a price.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    pub tokens: u64,
    #[serde(default)]
    pub cost: f64,
}

/// One declared-model call's reservation: its worst case, held from its
/// LLM_CALL until its LLM_RESULT (or the end of its turn).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reservation {
    pub call_id: String,
    pub turn: u32,
    pub worst: Spend,
}

/// A session's declared-model spend: what the providers counted, and the
/// reservations of calls not settled yet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmSpend {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cost: f64,
    /// Worst cases charged for calls whose turn ended without their
    /// LLM_RESULT (a crash, a cancel): they may have reached the provider.
    #[serde(default)]
    pub unreported: Spend,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved: Vec<Reservation>,
}

impl LlmSpend {
    pub fn is_empty(&self) -> bool {
        *self == LlmSpend::default()
    }
}

/// Why a session is `paused_budget`: the call its budget could not cover,
/// and the turn's input, which the resumed turn runs with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetPause {
    pub turn: u32,
    pub needed: Spend,
    pub input: Value,
    /// The deployment's `[llm] budget_per_session`, which applies while the
    /// session has no budget of its own.
    #[serde(default)]
    pub manifest: Option<Budget>,
}

/// A schedule: `input` becomes a turn of the session at `at`, once, or,
/// with a `cron` pattern, at every time it matches.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScheduleRecord {
    pub id: Uuid,
    /// When it is next due, RFC 3339 (UTC), and the same in Unix ms.
    pub at: String,
    pub due_ms: u64,
    pub input: Value,
    pub created_at: String,
    /// A cron pattern: after each firing the schedule is due again at the
    /// pattern's next time in `timezone` (`domain::cron`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// The IANA time zone of `cron`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// No firing after this time (a cron schedule's end), RFC 3339 (UTC),
    /// and the same in Unix ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<u64>,
    /// An app's schedule (on `AppRecord::schedules`): the route each
    /// firing's new session is created on (`domain::app_schedules`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// Who made it; `None` for a schedule stored before the field existed
    /// (made by a platform key or by the agent: never by an end user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<ScheduleCreator>,
}

/// Who made a schedule: what an end user may delete (only an end user's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleCreator {
    /// A platform key, through the API.
    Platform,
    /// The agent, from a turn (`schedule` of `wit/agent.wit`).
    Agent,
    /// The session's own end user, through the API.
    EndUser,
}

/// An input waiting for a turn of its own (its INPUT_QUEUED is journaled).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedInput {
    /// The `input_id` of its INPUT_QUEUED.
    pub input_id: String,
    pub input: Value,
    pub queued_at: String,
    /// The schedule that fired it while the session was busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_id: Option<Uuid>,
}

/// The decision a resumed turn runs with (kept until the turn ends, so a
/// restart can schedule it again, or say what may have happened).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResumeRecord {
    pub approved: bool,
    pub approver: String,
    /// The call as it runs: with the human's edited arguments, if any.
    pub pending: PendingApproval,
    /// What the decision added to approve or deny (absent in records from
    /// before richer decisions, and when it added nothing).
    #[serde(default, skip_serializing_if = "DecisionDetails::is_empty")]
    pub details: DecisionDetails,
}

/// What a human's decision may add to approve or deny (docs/approvals.md,
/// "Richer decisions"): at most one of `arguments` and `result`, both only
/// with an approval; a `message` with either.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DecisionDetails {
    /// The arguments the call runs with instead of the agent's (checked
    /// against the tool's JSON Schema by the API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// A note the agent receives with the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The call's result, given by the human: the tool is not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// A decision link's: the keyed hash of the address it was used from
    /// (`webhooks::links::address_hash`), journaled with the decision.
    /// Not a human's addition: `is_empty` leaves it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_hash: Option<String>,
}

impl DecisionDetails {
    /// Whether the decision added nothing (a plain approve or deny).
    pub fn is_empty(&self) -> bool {
        self.arguments.is_none() && self.message.is_none() && self.result.is_none()
    }
}

/// One tool call as journaled (TOOL_CALL).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    pub tool_call_id: String,
    pub name: String,
    pub arguments: Value,
}

/// A suspended turn's gated call, waiting for a human decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    pub call: ToolCallRecord,
    /// The agent's explanation, if it gave one.
    #[serde(default)]
    pub reason: Option<String>,
    /// Which mechanisms gate the tool: `code`, `manifest`, `policy`.
    pub gated_by: Vec<String>,
    /// Every call of the suspended step, in order (the gated one included).
    pub step: Vec<ToolCallRecord>,
    /// The input of the suspended turn, handed again to the resumed one.
    pub input: Value,
    /// The seq of the TOOL_APPROVAL_REQUIRED event.
    #[serde(default)]
    pub event_seq: u64,
    /// When the call is denied by `timeout` unless a human decided (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeyClass {
    Platform,
    Invocation,
}

/// A secret, sealed (see `secrets`): never stored in the clear.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecretRecord {
    pub name: String,
    /// Hex of the 24-byte XChaCha20 nonce.
    pub nonce: String,
    /// Hex of the sealed value (ciphertext and tag).
    pub ciphertext: String,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApiKeyRecord {
    pub id: String,
    pub name: String,
    pub class: KeyClass,
    #[serde(default)]
    pub app_id: Option<Uuid>,
    /// Hex SHA-256 of the whole key.
    pub sha256: String,
    /// A short, non-secret prefix of the key, for people to recognise it.
    pub prefix: String,
    pub created_at: String,
    /// Written at most about once a minute.
    #[serde(default)]
    pub last_used_at: Option<String>,
}

/// The first answer to a request that carried an `Idempotency-Key`
/// (`store::domain::idempotency`), kept with the work it answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    /// The command that answered (a key reused on another endpoint is refused).
    pub command: String,
    /// SHA-256 (hex) of the request's method, path and body, as the API computed it.
    pub fingerprint: String,
    pub created_at: String,
    /// Unix milliseconds after which the key is new again (and purged).
    pub expires_at_ms: u64,
    /// The command's answer (its own JSON shape).
    pub answer: Value,
}

/// One entry of the approvals feed (`GET /approvals/events`), stored as
/// this JSON and sent as the frame's data unchanged: a compatibility
/// contract like the journal's. The writer appends one whenever an
/// approval becomes pending, is decided (a timeout included) or is
/// withdrawn (`store::domain::feed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub(crate) struct ApprovalFeedEntry {
    /// What happened; also the frame's SSE `event` name.
    #[serde(rename = "type")]
    pub kind: FeedKind,
    pub session_id: Uuid,
    pub app_id: Uuid,
    /// The app's slug.
    pub app: String,
    /// The gated call.
    pub tool_call_id: String,
    /// The journal event behind the entry: `TOOL_APPROVAL_REQUIRED`,
    /// `TOOL_APPROVAL_GRANTED` or `TOOL_APPROVAL_DENIED`, or `SESSION_ENDED`
    /// for a withdrawal by an end; absent when the session was deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<Value>,
    /// Why an approval was withdrawn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<WithdrawReason>,
    /// The end user whose session it is, if an end user opened it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_user: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub(crate) enum FeedKind {
    /// A gated call waits for a decision.
    #[serde(rename = "APPROVAL_REQUESTED")]
    Requested,
    /// It was decided (by a human, or denied by `timeout`).
    #[serde(rename = "APPROVAL_DECIDED")]
    Decided,
    /// It will never be decided: its session ended or was deleted.
    #[serde(rename = "APPROVAL_WITHDRAWN")]
    Withdrawn,
}

impl FeedKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FeedKind::Requested => "APPROVAL_REQUESTED",
            FeedKind::Decided => "APPROVAL_DECIDED",
            FeedKind::Withdrawn => "APPROVAL_WITHDRAWN",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum WithdrawReason {
    SessionEnded,
    SessionDeleted,
}
