//! The typed bodies of the API's responses (documented in docs/api.md): one
//! type per view, each built from its record in one place. Their JSON is a
//! compatibility contract pinned by the golden files in `tests/golden/views/`,
//! and their schemas go into `GET /openapi.json`.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::journal::payloads::ToolApprovalRequired;
use crate::runtime::outbound::OutboundPolicy;
use crate::store::{
    ApiKeyRecord, AppRecord, DeploymentRecord, DeploymentStatus, KeyClass, LimitsRecord,
    SecretRecord, SessionRecord, SessionStatus, ToolInfo,
};

/// A session (`GET /sessions/{id}`, and the items of `GET /sessions`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionView {
    pub session_id: Uuid,
    pub app_id: Uuid,
    /// The app's slug.
    pub app: String,
    pub route: String,
    /// The deployment the session is pinned to.
    pub deployment_id: Uuid,
    pub deployment_version: u64,
    pub status: SessionStatus,
    /// The number of the latest turn (1 for the first).
    pub turn: u32,
    pub created_at: String,
    pub updated_at: String,
    /// The gated call the session waits on (status `awaiting_approval`).
    pub pending_approval: Option<PendingApprovalView>,
    /// The end user who owns the session (created with their token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_user: Option<String>,
    /// Inputs waiting for turns of their own (`on_busy`); omitted when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub queued_inputs: u32,
    /// What the session's declared-model calls used (docs/llm.md); omitted
    /// before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageView>,
    /// The session's LLM budget and where it stands; omitted when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetView>,
}

/// Tokens (and money, with `price`) the providers counted for a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UsageView {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

/// A session's LLM budget: numbers in its unit (`tokens` or `cost`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BudgetView {
    pub limit: crate::store::Budget,
    /// Settled calls, plus the worst cases of calls that never reported.
    pub spent: f64,
    /// Held by calls not settled yet.
    pub reserved: f64,
    /// While `paused_budget`: the refused call's worst case, which the
    /// limit must cover for the turn to resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needed: Option<f64>,
}

fn budget_view(s: &SessionRecord) -> Option<BudgetView> {
    let limit = s.budget?;
    let tokens = limit.cost.is_none();
    let of = |spend: &crate::store::Spend| {
        if tokens {
            spend.tokens as f64
        } else {
            spend.cost
        }
    };
    let llm = &s.llm;
    let spent = if tokens {
        (llm.input_tokens + llm.output_tokens + llm.unreported.tokens) as f64
    } else {
        llm.cost + llm.unreported.cost
    };
    Some(BudgetView {
        limit,
        spent,
        reserved: llm.reserved.iter().map(|r| of(&r.worst)).sum(),
        needed: s.budget_pause.as_ref().map(|p| of(&p.needed)),
    })
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The gated call a session waits on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PendingApprovalView {
    pub tool_call_id: String,
    pub name: String,
    pub arguments: Value,
    pub gated_by: Vec<String>,
    /// When the call is denied by `timeout` unless decided first (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

impl From<&SessionRecord> for SessionView {
    fn from(s: &SessionRecord) -> Self {
        SessionView {
            session_id: s.id,
            app_id: s.app_id,
            app: s.app_slug.clone(),
            route: s.route.clone(),
            deployment_id: s.deployment_id,
            deployment_version: s.deployment_version,
            status: s.status,
            turn: s.turn,
            created_at: s.created_at.clone(),
            updated_at: s.updated_at.clone(),
            pending_approval: s.pending_approval.as_ref().map(|p| PendingApprovalView {
                tool_call_id: p.call.tool_call_id.clone(),
                name: p.call.name.clone(),
                arguments: p.call.arguments.clone(),
                gated_by: p.gated_by.clone(),
                expires_at: p.expires_at.clone(),
            }),
            end_user: s.end_user.clone(),
            queued_inputs: u32::try_from(s.queued.len()).unwrap_or(u32::MAX),
            usage: (!s.llm.is_empty()).then(|| UsageView {
                input_tokens: s.llm.input_tokens,
                output_tokens: s.llm.output_tokens,
                cost: (s.llm.cost > 0.0).then_some(s.llm.cost),
            }),
            budget: budget_view(s),
        }
    }
}

/// `201` of `POST /sessions`: the session, and a stream token for its events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CreatedSession {
    #[serde(flatten)]
    pub session: SessionView,
    pub stream_token: String,
    pub stream_token_expires_at: String,
}

/// `201` of `POST /sessions/{id}/stream-token`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct StreamToken {
    pub session_id: Uuid,
    pub stream_token: String,
    pub stream_token_expires_at: String,
}

/// `202` of `POST /sessions/{id}/input`: the turn is scheduled, or (with
/// `on_busy`) the input is queued for a turn of its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct TurnAccepted {
    pub session_id: Uuid,
    /// The turn started; for a queued input, the turn the session was busy with.
    pub turn: u32,
    /// `running`; for an input queued behind a pending approval, `awaiting_approval`.
    pub status: SessionStatus,
    /// Set when the input was queued (its INPUT_QUEUED has the same `input_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<QueuedView>,
}

/// A queued input (`TurnAccepted.queued`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct QueuedView {
    /// `inq_` and 32 hex digits.
    pub input_id: String,
    /// Inputs that run before it, counted from 1 (1: it runs next).
    pub position: u32,
}

/// `202` of `POST /sessions/{id}/approval`: decided; the turn resumes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct DecisionAccepted {
    pub session_id: Uuid,
    pub tool_call_id: String,
    pub approved: bool,
    pub approver: String,
    /// The resumed turn.
    pub turn: u32,
    /// Always `running`.
    pub status: SessionStatus,
}

/// A page of `GET /sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct SessionPage {
    pub items: Vec<SessionView>,
    /// The `cursor` of the next page; `null` on the last one.
    pub next_cursor: Option<String>,
}

/// A page of `GET /approvals`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct ApprovalPage {
    pub items: Vec<ApprovalItemView>,
    /// The `cursor` of the next page; `null` on the last one.
    pub next_cursor: Option<String>,
}

/// The first frame of `GET /approvals/events` without a usable
/// `Last-Event-ID`: every pending approval as of the feed position that is
/// the frame's id, so the entries after it are exactly what changed since.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct ApprovalSnapshot {
    /// Oldest request first, at most the server's `--approvals-snapshot-max`.
    pub items: Vec<ApprovalItemView>,
    /// Whether more approvals are pending than `items` holds: page the
    /// rest with `GET /approvals?cursor=<the last item's event id>`.
    pub more: bool,
}

/// A pending approval (`GET /approvals`): the session and its
/// `TOOL_APPROVAL_REQUIRED` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct ApprovalItemView {
    pub session: SessionView,
    pub event: ApprovalEvent,
}

/// A `TOOL_APPROVAL_REQUIRED` event in its envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct ApprovalEvent {
    pub id: Uuid,
    pub seq: u64,
    pub session_id: Uuid,
    /// Always `TOOL_APPROVAL_REQUIRED`.
    #[serde(rename = "type")]
    pub event_type: String,
    pub payload: ToolApprovalRequired,
    pub created_at: String,
}

/// A deployment (`GET /apps/{id}/deployments`, `POST /deployments`, activation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeploymentView {
    pub id: Uuid,
    pub app_id: Uuid,
    pub app: String,
    pub version: u64,
    pub status: DeploymentStatus,
    /// Whether it is the app's current deployment.
    pub active: bool,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub entry: String,
    pub manifest_gated_tools: Vec<String>,
    pub approval_policy: Vec<String>,
    pub secrets: Vec<String>,
    pub limits: LimitsRecord,
    pub outbound: OutboundView,
    /// Only for a failed build: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Only once built: the agent's routes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<String>>,
    /// Only once built: the agent's tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolInfo>>,
}

/// A deployment's outbound origins: as declared, and as the server allows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OutboundView {
    pub declared: Vec<String>,
    pub effective: Vec<String>,
}

impl DeploymentView {
    pub fn new(d: &DeploymentRecord, app: &AppRecord, policy: &OutboundPolicy) -> Self {
        let effective = (policy.effective(&d.outbound).iter())
            .map(|o| o.to_string())
            .collect();
        DeploymentView {
            id: d.id,
            app_id: d.app_id,
            app: app.slug.clone(),
            version: d.version,
            status: d.status,
            active: app.current_deployment == Some(d.id),
            created_at: d.created_at.clone(),
            finished_at: d.finished_at.clone(),
            entry: d.entry.clone(),
            manifest_gated_tools: d.manifest_gated.clone(),
            approval_policy: d.approval_policy.clone(),
            secrets: d.secrets.clone(),
            limits: d.limits.clone(),
            outbound: OutboundView {
                declared: d.outbound.clone(),
                effective,
            },
            error: d.error.clone(),
            routes: d.description.as_ref().map(|d| d.routes.clone()),
            tools: d.description.as_ref().map(|d| d.tools.clone()),
        }
    }
}

/// An app (`GET /apps`, `GET /apps/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct AppView {
    pub id: Uuid,
    pub slug: String,
    pub created_at: String,
    pub current_deployment: Option<CurrentDeployment>,
    /// The current deployment's routes (empty without one).
    pub routes: Vec<String>,
    /// The current deployment's tools (empty without one).
    pub tools: Vec<ToolInfo>,
}

/// Which deployment of an app is current.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct CurrentDeployment {
    pub id: Uuid,
    pub version: u64,
}

impl AppView {
    pub(crate) fn new(a: &AppRecord, current: Option<&DeploymentRecord>) -> Self {
        let description = current.and_then(|d| d.description.as_ref());
        AppView {
            id: a.id,
            slug: a.slug.clone(),
            created_at: a.created_at.clone(),
            current_deployment: current.map(|d| CurrentDeployment {
                id: d.id,
                version: d.version,
            }),
            routes: description.map(|d| d.routes.clone()).unwrap_or_default(),
            tools: description.map(|d| d.tools.clone()).unwrap_or_default(),
        }
    }
}

/// An API key, never its secret (`GET /api-keys`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApiKeyView {
    pub id: String,
    pub name: String,
    pub class: KeyClass,
    /// The app of an invocation key.
    pub app_id: Option<Uuid>,
    /// A short, non-secret prefix, for people to recognise the key.
    pub prefix: String,
    pub created_at: String,
    pub last_used_at: Option<String>,
}

impl From<&ApiKeyRecord> for ApiKeyView {
    fn from(r: &ApiKeyRecord) -> Self {
        ApiKeyView {
            id: r.id.clone(),
            name: r.name.clone(),
            class: r.class,
            app_id: r.app_id,
            prefix: r.prefix.clone(),
            created_at: r.created_at.clone(),
            last_used_at: r.last_used_at.clone(),
        }
    }
}

/// `201` of `POST /api-keys`: the key's view and, this once, its secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MintedKey {
    #[serde(flatten)]
    pub view: ApiKeyView,
    /// The key itself: shown once, never stored in the clear.
    pub key: String,
}

pub(crate) use super::webhook_views::{CreatedWebhook, DeliveryPage, DeliveryView, WebhookView};

/// A secret's name and dates, never its value (`GET /secrets`, `PUT`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct SecretView {
    pub name: String,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&SecretRecord> for SecretView {
    fn from(r: &SecretRecord) -> Self {
        SecretView {
            name: r.name.clone(),
            created_at: r.created_at.clone(),
            updated_at: r.updated_at.clone(),
        }
    }
}

/// `GET /healthz` and `GET /readyz`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct Health {
    /// `ok` (healthz), `ready` or `not_ready` (readyz).
    pub status: String,
    /// Why not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Every error response: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong: a stable `code` for programs, a `message` for people.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct ErrorDetail {
    /// One of `ErrorCode`'s (a `String` here, so that a client of this
    /// crate reads a code newer than itself).
    #[schema(value_type = super::ErrorCode)]
    pub code: String,
    pub message: String,
}
