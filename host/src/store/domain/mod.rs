//! The domain: the rules of sessions, turns, approvals (and their feed),
//! deployments, keys, secrets and idempotency keys, written once over the
//! storage boundary (`store::engine`).
//!
//! Each command is a struct with an `Op` impl (`store::batch`) beside its
//! rule; the writer applies it inside a batch (`store::batch`), which gives
//! it the engine's transaction and the batch's view of sessions, and starts
//! the turns its output declares (`store::start`). No file here knows which
//! engine it runs on.

mod app_schedules;
mod budgets;
mod by;
mod clock;
mod closing;
mod cron;
mod deletion;
mod deployments;
mod end_users;
mod feed;
mod firing;
mod idempotency;
mod journal_cap;
mod keys;
mod queue;
mod quotas;
mod recovery;
mod schedules;
mod secrets;
mod sessions;
mod threads;
mod timers;
mod turn_start;
mod webhooks;

use super::records::{AgentDescription, Artifact, DecisionDetails, LimitsRecord, PendingApproval};
use super::start::{TurnReason, TurnTicket};

pub(super) use app_schedules::{CreateAppSchedule, DeleteAppSchedule};
pub(crate) use budgets::Reserved;
pub(super) use budgets::{ReserveLlm, SetBudget};
pub use by::By;
pub(crate) use by::PolicyRefusal;
pub(crate) use clock::{rfc3339_ms, unix_ms};
pub(crate) use cron::CronRule;
pub(super) use deletion::DeleteSession;
pub(super) use deployments::{Activate, CreateDeployment, FinishBuild, SetArtifact};
pub(super) use end_users::RevokeEndUser;
pub(crate) use end_users::{END_USER_KEY_PREFIX, end_user_key};
pub(super) use feed::PurgeFeed;
pub(super) use firing::FireSchedule;
pub(crate) use firing::Fired;
#[cfg(test)]
pub(crate) use idempotency::TTL as IDEMPOTENCY_TTL;
pub(crate) use idempotency::{
    Answered, DecisionAnswer, DeploymentAnswer, Idempotency, MAX_KEY_LEN, TurnAnswer,
};
pub(super) use idempotency::{Once, PurgeIdempotency};
pub(super) use keys::{DeleteApiKey, PutApiKey, TouchApiKey};
#[cfg(test)]
pub(crate) use queue::MAX_QUEUED_INPUTS;
pub(crate) use queue::OnBusy;
pub(crate) use recovery::Recovery;
pub(super) use recovery::{CloseTurn, Recover};
pub(crate) use schedules::MAX_SCHEDULES;
pub(super) use schedules::{CreateSchedule, DeleteSchedule};
pub(super) use secrets::{DeleteSecret, PutSecret};
pub(crate) use sessions::InputOutcome;
pub(super) use sessions::{Append, CreateSession, Decide, EndSession, FinishTurn, PostInput};
pub(super) use threads::{DecideAt, OpenThread};
pub(crate) use threads::{ThreadTurn, thread_key};
pub(crate) use timers::{MAX_TURN_SCHEDULES, TurnTimers};
pub(crate) use webhooks::{AttemptOutcome, MAX_PENDING as WEBHOOK_MAX_PENDING};
pub(super) use webhooks::{
    ClaimDeliveries, CreateWebhook, DeleteWebhook, FinishAttempt, PurgeDeliveries,
    ReleaseDeliveries, ResendDelivery, RotateWebhook, enqueue as enqueue_webhooks,
};
#[cfg(test)]
pub(crate) use webhooks::{
    deployment_data as webhook_deployment_data, event_data as webhook_event_data,
    withdrawn_data as webhook_withdrawn_data,
};

/// A deployment to register (the writer assigns the version).
#[derive(Debug, Clone)]
pub struct NewDeployment {
    pub app_slug: String,
    /// A version pinned by the manifest; refused when it exists.
    pub version: Option<u64>,
    pub manifest: String,
    pub entry: String,
    /// Tools the manifest gates.
    pub manifest_gated: Vec<String>,
    /// The operator's approval policy for this deployment.
    pub approval_policy: Vec<String>,
    /// The secrets the manifest declares.
    pub secrets: Vec<String>,
    /// The manifest's per-turn limits.
    pub limits: LimitsRecord,
    /// The manifest's outbound allowlist.
    pub outbound: Vec<String>,
    /// The manifest's `[end_users]` table.
    pub end_users: Option<crate::store::records::EndUsersRecord>,
    /// Tools whose calls the session's end user may decide.
    pub end_user_approvals: Vec<String>,
    /// The manifest's `[llm] budget_per_session`.
    pub llm_budget: Option<super::records::Budget>,
}

/// How a build ended.
#[derive(Debug, Clone)]
pub enum BuildOutcome {
    Succeeded {
        description: AgentDescription,
        artifact: Artifact,
    },
    Failed(String),
}

/// A human's decision, as the API hands it to the writer.
#[derive(Debug, Clone)]
pub struct Decision {
    pub approved: bool,
    pub approver: String,
    /// Who decided (`key_id` recorded): an end user may decide only a call
    /// of their own session whose tool the manifest leaves to its end user.
    pub by: By,
    /// Edited arguments, a message, a given result (the API checked them).
    pub details: DecisionDetails,
    /// The TOOL_APPROVAL_REQUIRED seq the API checked `details.arguments`
    /// against: another pending call by then is a conflict (409).
    pub checked_seq: Option<u64>,
}

/// How a turn ended; decides the session's next status.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnOutcome {
    Ended,
    Errored,
    SessionEnded,
    /// The turn suspended on a gated call; its last event is TOOL_APPROVAL_REQUIRED.
    Suspended(Box<PendingApproval>),
    /// A declared-model call its LLM budget cannot cover paused the
    /// session; its last event is BUDGET_REACHED.
    BudgetPaused(Box<super::records::BudgetPause>),
}
