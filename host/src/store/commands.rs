//! The writer's commands, the types they carry, and `WriterHandle`, which
//! sends them to the writer thread (`writer.rs`) and awaits their replies.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::StoreError;
use super::batch::Reply;
use super::outbox::{AppendAck, Outbox};
use super::records::{
    AgentDescription, ApiKeyRecord, Artifact, DeploymentRecord, LimitsRecord, PendingApproval,
    SecretRecord, SessionRecord,
};
use super::sessions::Recovery;
use crate::journal::NewEvent;

/// Commands waiting for the writer before senders wait (backpressure).
pub(super) const QUEUE: usize = 8192;

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

/// Why a turn runs.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnReason {
    Input,
    /// A decision on the gated call that suspended the previous turn.
    ApprovalDecision {
        approved: bool,
        approver: String,
        pending: Box<PendingApproval>,
    },
}

/// A human's decision, as the API hands it to the writer.
#[derive(Debug, Clone)]
pub struct Decision {
    pub approved: bool,
    pub approver: String,
    /// The id of the API key that decided.
    pub key_id: String,
}

/// Everything needed to run a scheduled turn.
#[derive(Debug, Clone)]
pub struct TurnTicket {
    pub session_id: Uuid,
    pub turn: u32,
    pub deployment_id: Uuid,
    pub app_slug: String,
    pub route: String,
    pub input: Value,
    pub reason: TurnReason,
}

/// How a turn ended; decides the session's next status.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnOutcome {
    Ended,
    Errored,
    SessionEnded,
    /// The turn suspended on a gated call; its last event is TOOL_APPROVAL_REQUIRED.
    Suspended(Box<PendingApproval>),
}

pub(super) enum Command {
    CreateDeployment(NewDeployment, Reply<DeploymentRecord>),
    FinishBuild(Uuid, BuildOutcome, Reply<DeploymentRecord>),
    SetArtifact(Uuid, Artifact, Reply<()>),
    CreateSession {
        app: String,
        route: String,
        input: Value,
        boot: Uuid,
        reply: Reply<(SessionRecord, TurnTicket)>,
    },
    PostInput {
        session: Uuid,
        input: Value,
        boot: Uuid,
        reply: Reply<TurnTicket>,
    },
    /// Takes what the turn's outbox holds.
    Append {
        outbox: Arc<Outbox>,
        reply: Reply<()>,
    },
    FinishTurn {
        session: Uuid,
        turn: u32,
        events: Vec<NewEvent>,
        outcome: TurnOutcome,
        reply: Reply<()>,
    },
    Decide {
        session: Uuid,
        decision: Decision,
        boot: Uuid,
        reply: Reply<TurnTicket>,
    },
    Recover(Uuid, Reply<Recovery>),
    PutApiKey(ApiKeyRecord, Reply<()>),
    DeleteApiKey(String, Reply<ApiKeyRecord>),
    PutSecret(SecretRecord, Reply<(SecretRecord, bool)>),
    DeleteSecret(String, Reply<()>),
    Activate(Uuid, Reply<DeploymentRecord>),
    TouchApiKey(String, String, Reply<()>),
}

/// Sends commands to the writer thread. Cheap to clone.
#[derive(Clone)]
pub struct WriterHandle {
    pub(super) tx: mpsc::Sender<Command>,
}

impl WriterHandle {
    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(make(tx))
            .await
            .map_err(|_| StoreError::WriterGone)?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// For threads outside the async runtime (the builder).
    fn blocking_call<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .blocking_send(make(tx))
            .map_err(|_| StoreError::WriterGone)?;
        rx.blocking_recv().map_err(|_| StoreError::WriterGone)?
    }

    pub async fn create_deployment(
        &self,
        new: NewDeployment,
    ) -> Result<DeploymentRecord, StoreError> {
        self.call(|r| Command::CreateDeployment(new, r)).await
    }

    pub fn blocking_finish_build(
        &self,
        id: Uuid,
        outcome: BuildOutcome,
    ) -> Result<DeploymentRecord, StoreError> {
        self.blocking_call(|r| Command::FinishBuild(id, outcome, r))
    }

    pub async fn finish_build(
        &self,
        id: Uuid,
        outcome: BuildOutcome,
    ) -> Result<DeploymentRecord, StoreError> {
        self.call(|r| Command::FinishBuild(id, outcome, r)).await
    }

    pub async fn set_artifact(&self, id: Uuid, artifact: Artifact) -> Result<(), StoreError> {
        self.call(|r| Command::SetArtifact(id, artifact, r)).await
    }

    /// Creates a session pinned to the app's current deployment and schedules turn 1.
    pub async fn create_session(
        &self,
        app: String,
        route: String,
        input: Value,
        boot: Uuid,
    ) -> Result<(SessionRecord, TurnTicket), StoreError> {
        self.call(|reply| Command::CreateSession {
            app,
            route,
            input,
            boot,
            reply,
        })
        .await
    }

    /// Journals a follow-up input and schedules its turn, or refuses (409).
    pub async fn post_input(
        &self,
        session: Uuid,
        input: Value,
        boot: Uuid,
    ) -> Result<TurnTicket, StoreError> {
        self.call(|reply| Command::PostInput {
            session,
            input,
            boot,
            reply,
        })
        .await
    }

    /// Queues events of a running turn without waiting for their commit
    /// (through its outbox, so a busy writer takes a burst as one command);
    /// the returned ack resolves once they are committed (or failed).
    pub async fn append(
        &self,
        outbox: &Arc<Outbox>,
        events: Vec<NewEvent>,
    ) -> Result<AppendAck, StoreError> {
        // Most events join the command already on its way.
        let events = match outbox.join(events) {
            Ok(ack) => return Ok(ack),
            Err(events) => events,
        };
        // A queue slot first: past this await nothing can be cancelled, so
        // an outbox never waits on a command that was dropped unsent (a
        // turn's deadline drops its host call mid-await).
        let permit = self
            .tx
            .reserve()
            .await
            .map_err(|_| StoreError::WriterGone)?;
        Ok(send_append(permit, outbox, events))
    }

    /// `append` for callers that cannot wait (an outbound request ending
    /// inside a body's drop): hands the events back when the writer's queue
    /// is full.
    pub fn try_append(
        &self,
        outbox: &Arc<Outbox>,
        events: Vec<NewEvent>,
    ) -> Result<AppendAck, Vec<NewEvent>> {
        let events = match outbox.join(events) {
            Ok(ack) => return Ok(ack),
            Err(events) => events,
        };
        match self.tx.try_reserve() {
            Ok(permit) => Ok(send_append(permit, outbox, events)),
            Err(_) => Err(events),
        }
    }

    /// Journals a turn's last events and releases it, in one commit.
    pub async fn finish_turn(
        &self,
        session: Uuid,
        turn: u32,
        events: Vec<NewEvent>,
        outcome: TurnOutcome,
    ) -> Result<(), StoreError> {
        self.call(|reply| Command::FinishTurn {
            session,
            turn,
            events,
            outcome,
            reply,
        })
        .await
    }

    /// Journals a decision on the session's pending approval and schedules the
    /// resumed turn, or refuses (409 when nothing is pending). Check and
    /// decide are one command: of two racing decisions exactly one wins.
    pub async fn decide(
        &self,
        session: Uuid,
        decision: Decision,
        boot: Uuid,
    ) -> Result<TurnTicket, StoreError> {
        self.call(|reply| Command::Decide {
            session,
            decision,
            boot,
            reply,
        })
        .await
    }

    /// Settles every turn an earlier process left running (see `Recovery`).
    pub async fn recover(&self, boot: Uuid) -> Result<Recovery, StoreError> {
        self.call(|r| Command::Recover(boot, r)).await
    }

    pub async fn put_api_key(&self, record: ApiKeyRecord) -> Result<(), StoreError> {
        self.call(|r| Command::PutApiKey(record, r)).await
    }

    /// Revokes a key; refuses (409) to revoke the last platform key.
    pub async fn delete_api_key(&self, id: String) -> Result<ApiKeyRecord, StoreError> {
        self.call(|r| Command::DeleteApiKey(id, r)).await
    }

    /// Stores a sealed secret (create or rotate); returns it and whether it is new.
    pub async fn put_secret(
        &self,
        record: SecretRecord,
    ) -> Result<(SecretRecord, bool), StoreError> {
        self.call(|r| Command::PutSecret(record, r)).await
    }

    pub async fn delete_secret(&self, name: String) -> Result<(), StoreError> {
        self.call(|r| Command::DeleteSecret(name, r)).await
    }

    /// Makes a built deployment its app's current one (rollback or re-activation).
    pub async fn activate(&self, id: Uuid) -> Result<DeploymentRecord, StoreError> {
        self.call(|r| Command::Activate(id, r)).await
    }

    /// Records a key's last use (the caller rate-limits).
    pub async fn touch_api_key(&self, id: String, at: String) -> Result<(), StoreError> {
        self.call(|r| Command::TouchApiKey(id, at, r)).await
    }
}

impl Command {
    pub(super) fn fail(self, err: &StoreError) {
        let err = err.clone();
        match self {
            Command::CreateDeployment(_, r) => drop(r.send(Err(err))),
            Command::FinishBuild(_, _, r) => drop(r.send(Err(err))),
            Command::SetArtifact(_, _, r) => drop(r.send(Err(err))),
            Command::CreateSession { reply, .. } => drop(reply.send(Err(err))),
            Command::PostInput { reply, .. } => drop(reply.send(Err(err))),
            Command::Append { outbox, reply } => {
                // Dropped with the batch: the turn's next event starts afresh.
                drop(outbox.take());
                drop(reply.send(Err(err)));
            }
            Command::FinishTurn { reply, .. } => drop(reply.send(Err(err))),
            Command::Decide { reply, .. } => drop(reply.send(Err(err))),
            Command::Recover(_, r) => drop(r.send(Err(err))),
            Command::PutApiKey(_, r) => drop(r.send(Err(err))),
            Command::DeleteApiKey(_, r) => drop(r.send(Err(err))),
            Command::PutSecret(_, r) => drop(r.send(Err(err))),
            Command::DeleteSecret(_, r) => drop(r.send(Err(err))),
            Command::Activate(_, r) => drop(r.send(Err(err))),
            Command::TouchApiKey(_, _, r) => drop(r.send(Err(err))),
        }
    }
}

/// Queues `events` in `outbox` and, when no command is on its way for it,
/// sends one in the queue slot already held.
fn send_append(
    permit: mpsc::Permit<'_, Command>,
    outbox: &Arc<Outbox>,
    events: Vec<NewEvent>,
) -> AppendAck {
    let (ack, reply) = outbox.push(events);
    if let Some(reply) = reply {
        let outbox = outbox.clone();
        permit.send(Command::Append { outbox, reply });
    }
    ack
}
