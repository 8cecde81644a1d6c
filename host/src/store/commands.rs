//! How a command reaches the writer: the `Op` trait every domain command
//! implements, the queue, and `WriterHandle`, which sends commands to the
//! writer thread (`writer.rs`) and awaits their replies.
//!
//! A new command is one struct with an `Op` impl beside its rule in
//! `domain/`, and (for convenience) one method here.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::StoreError;
use super::batch::Batch;
use super::domain::{
    Activate, Answered, Append, BuildOutcome, CloseTurn, CreateDeployment, CreateSession, Decide,
    DecideAt, Decision, DecisionAnswer, DeleteApiKey, DeleteSecret, DeleteSession,
    DeploymentAnswer, EndSession, FinishBuild, FinishTurn, Idempotency, NewDeployment, Once,
    OpenThread, PostInput, PurgeFeed, PurgeIdempotency, PutApiKey, PutSecret, Recover, Recovery,
    SetArtifact, ThreadTurn, TouchApiKey, TurnAnswer, TurnOutcome, TurnTicket,
};
use super::outbox::{AppendAck, Outbox};
use super::records::{ApiKeyRecord, Artifact, DeploymentRecord, SecretRecord, SessionRecord};
use super::start::{Committed, EarlyStart, Starter};
use crate::journal::payloads::EndUserInfo;
use crate::journal::{NewEvent, TurnErrorKind};

/// Commands waiting for the writer before senders wait (backpressure).
pub(super) const QUEUE: usize = 8192;

pub(super) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// One writer command: its inputs and its rule, applied inside a batch.
///
/// `apply` may run more than once for one command (an engine retries a
/// transaction that lost a race), each time from the state the transaction
/// sees: it must not consume its inputs.
pub(super) trait Op: Send + 'static {
    type Output: Send + 'static;
    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<Self::Output, StoreError>;
    /// The command's batch failed before the command was applied.
    fn abandon(&mut self) {}
    /// The session the command decides on, when it is known before it is
    /// applied: the engine locks a batch's sessions together, in one order.
    fn session(&self) -> Option<Uuid> {
        None
    }
}

/// A command in the writer's queue: an `Op`, its latest result and its reply.
pub(super) trait Queued: Send {
    /// Applies the command (unless the batch already failed) and keeps its result.
    fn apply(&mut self, batch: &mut Batch<'_>);
    /// Answers once the batch committed (`failure: None`) or failed.
    fn reply(self: Box<Self>, failure: Option<&StoreError>);
    /// `Op::session`.
    fn session(&self) -> Option<Uuid>;
    /// The whole batch is applied and its commit is next, on an engine that
    /// commits what it applied: starts the command's turn, if it has one
    /// to start early (`start.rs`), with the batch's `committed`.
    fn applied(&mut self, committed: &mut dyn FnMut() -> Committed);
}

struct Pending<O: Op> {
    op: O,
    result: Option<Result<O::Output, StoreError>>,
    reply: Reply<O::Output>,
    early: Option<EarlyStart<O::Output>>,
}

impl<O: Op> Queued for Pending<O> {
    fn apply(&mut self, batch: &mut Batch<'_>) {
        if batch.failed() {
            self.result = None;
            return;
        }
        let result = self.op.apply(batch);
        if let Err(err) = &result
            && err.fails_batch()
        {
            // The transaction may hold part of this command: fail the whole batch.
            batch.fail(err.clone());
        }
        self.result = Some(result);
    }

    fn session(&self) -> Option<Uuid> {
        self.op.session()
    }

    fn applied(&mut self, committed: &mut dyn FnMut() -> Committed) {
        if let (Some(early), Some(Ok(output))) = (&self.early, &self.result)
            && let Some(ticket) = (early.ticket)(output)
        {
            early.starter.start(ticket.clone(), Some(committed()));
        }
    }

    fn reply(mut self: Box<Self>, failure: Option<&StoreError>) {
        let result = match (failure, self.result.take()) {
            // A rejection stands whatever happened to the batch.
            (_, Some(Err(rejected))) => Err(rejected),
            (None, Some(ok)) => ok,
            (Some(err), Some(Ok(_))) => Err(err.clone()),
            (Some(err), None) => {
                self.op.abandon();
                Err(err.clone())
            }
            (None, None) => Err(StoreError::Storage(
                "the writer committed a batch without applying one of its commands".into(),
            )),
        };
        // The caller may have gone away (client disconnected); that is fine.
        let _ = self.reply.send(result);
    }
}

pub(super) type Command = Box<dyn Queued>;

fn queued<O: Op>(op: O, reply: Reply<O::Output>) -> Command {
    queued_starting(op, reply, None)
}

fn queued_starting<O: Op>(
    op: O,
    reply: Reply<O::Output>,
    early: Option<EarlyStart<O::Output>>,
) -> Command {
    Box::new(Pending {
        op,
        result: None,
        reply,
        early,
    })
}

/// Sends commands to the writer thread. Cheap to clone.
#[derive(Clone)]
pub struct WriterHandle {
    pub(super) tx: mpsc::Sender<Command>,
}

impl WriterHandle {
    async fn call<O: Op>(&self, op: O) -> Result<O::Output, StoreError> {
        self.call_starting(op, None).await
    }

    /// `call`, with the command's turn started as soon as the writer applied
    /// it (`start.rs`) when the engine allows, else by the starter's
    /// caller once it is answered.
    async fn call_starting<O: Op>(
        &self,
        op: O,
        early: Option<EarlyStart<O::Output>>,
    ) -> Result<O::Output, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(queued_starting(op, reply, early))
            .await
            .map_err(|_| StoreError::WriterGone)?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// For threads outside the async runtime (the builder).
    fn blocking_call<O: Op>(&self, op: O) -> Result<O::Output, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .blocking_send(queued(op, tx))
            .map_err(|_| StoreError::WriterGone)?;
        rx.blocking_recv().map_err(|_| StoreError::WriterGone)?
    }

    pub async fn create_deployment(
        &self,
        new: NewDeployment,
    ) -> Result<DeploymentRecord, StoreError> {
        self.call(CreateDeployment(new)).await
    }

    pub fn blocking_finish_build(
        &self,
        id: Uuid,
        outcome: BuildOutcome,
    ) -> Result<DeploymentRecord, StoreError> {
        self.blocking_call(FinishBuild(id, outcome))
    }

    pub async fn finish_build(
        &self,
        id: Uuid,
        outcome: BuildOutcome,
    ) -> Result<DeploymentRecord, StoreError> {
        self.call(FinishBuild(id, outcome)).await
    }

    pub async fn set_artifact(&self, id: Uuid, artifact: Artifact) -> Result<(), StoreError> {
        self.call(SetArtifact(id, artifact)).await
    }

    pub fn blocking_set_artifact(&self, id: Uuid, artifact: Artifact) -> Result<(), StoreError> {
        self.blocking_call(SetArtifact(id, artifact))
    }

    /// Creates a session pinned to the app's current deployment and schedules turn 1.
    pub async fn create_session(
        &self,
        app: String,
        route: String,
        input: Value,
        boot: Uuid,
    ) -> Result<(SessionRecord, TurnTicket), StoreError> {
        self.call(CreateSession {
            app,
            route,
            input,
            boot,
            end_user: None,
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
        self.call(PostInput {
            session,
            input,
            boot,
        })
        .await
    }

    /// An AG-UI run's input on a thread: the next input of the thread's
    /// session, or a new session on the thread's first run.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn open_thread(
        &self,
        app: String,
        route: String,
        thread: String,
        input: Value,
        boot: Uuid,
        end_user: Option<EndUserInfo>,
        starter: Option<&Arc<Starter>>,
    ) -> Result<ThreadTurn, StoreError> {
        let op = OpenThread {
            app,
            route,
            thread,
            input,
            boot,
            end_user,
        };
        self.call_starting(op, early(starter, |t| Some(&t.ticket)))
            .await
    }

    /// Decides the pending approval whose TOOL_APPROVAL_REQUIRED is at
    /// `approval_seq`, or refuses (409) when another one, or none, is pending.
    pub async fn decide_at(
        &self,
        session: Uuid,
        approval_seq: u64,
        decision: Decision,
        boot: Uuid,
        starter: Option<&Arc<Starter>>,
    ) -> Result<ThreadTurn, StoreError> {
        let op = DecideAt {
            session,
            approval_seq,
            decision,
            boot,
        };
        self.call_starting(op, early(starter, |t| Some(&t.ticket)))
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
        self.call(FinishTurn {
            session,
            turn,
            events,
            outcome,
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
        self.call(Decide {
            session,
            decision,
            boot,
        })
        .await
    }

    /// Closes a running turn its runner cannot close (see `CloseTurn`);
    /// 409 when it is no longer running.
    pub async fn close_turn(
        &self,
        session: Uuid,
        turn: u32,
        kind: TurnErrorKind,
        message: String,
    ) -> Result<(), StoreError> {
        self.call(CloseTurn {
            session,
            turn,
            kind,
            message,
        })
        .await
    }

    /// Ends an idle, errored or suspended session with SESSION_ENDED.
    pub async fn end_session(
        &self,
        session: Uuid,
        reason: Option<String>,
        key_id: String,
    ) -> Result<SessionRecord, StoreError> {
        self.call(EndSession {
            session,
            reason,
            key_id,
        })
        .await
    }

    /// Deletes a session with no running turn (see `DeleteSession`).
    pub async fn delete_session(
        &self,
        session: Uuid,
        ended_before: Option<String>,
    ) -> Result<(), StoreError> {
        self.call(DeleteSession {
            session,
            ended_before,
        })
        .await
    }

    /// `create_session` done once per idempotency key (`key`; every time
    /// without one): a retry answers the first session (`work: None`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn create_session_once(
        &self,
        app: String,
        route: String,
        input: Value,
        boot: Uuid,
        end_user: Option<EndUserInfo>,
        key: Option<Idempotency>,
        starter: Option<&Arc<Starter>>,
    ) -> Result<Answered<(SessionRecord, TurnTicket), SessionRecord>, StoreError> {
        let op = CreateSession {
            app,
            route,
            input,
            boot,
            end_user,
        };
        let early = early(starter, |a: &Answered<_, _>| {
            a.work.as_ref().map(|(_, t)| t)
        });
        self.call_starting(Once { op, key }, early).await
    }

    /// `post_input` done once per idempotency key.
    pub async fn post_input_once(
        &self,
        session: Uuid,
        input: Value,
        boot: Uuid,
        key: Option<Idempotency>,
        starter: Option<&Arc<Starter>>,
    ) -> Result<Answered<TurnTicket, TurnAnswer>, StoreError> {
        let op = PostInput {
            session,
            input,
            boot,
        };
        let early = early(starter, |a: &Answered<_, _>| a.work.as_ref());
        self.call_starting(Once { op, key }, early).await
    }

    /// `decide` done once per idempotency key.
    pub async fn decide_once(
        &self,
        session: Uuid,
        decision: Decision,
        boot: Uuid,
        key: Option<Idempotency>,
        starter: Option<&Arc<Starter>>,
    ) -> Result<Answered<TurnTicket, DecisionAnswer>, StoreError> {
        let op = Decide {
            session,
            decision,
            boot,
        };
        let early = early(starter, |a: &Answered<_, _>| a.work.as_ref());
        self.call_starting(Once { op, key }, early).await
    }

    /// `create_deployment` done once per idempotency key; the answer holds
    /// the row and its app as committed.
    pub async fn create_deployment_once(
        &self,
        new: NewDeployment,
        key: Option<Idempotency>,
    ) -> Result<Answered<DeploymentRecord, DeploymentAnswer>, StoreError> {
        let op = CreateDeployment(new);
        self.call(Once { op, key }).await
    }

    /// Forgets up to `limit` idempotency answers expired at `now_ms`.
    pub async fn purge_idempotency(&self, now_ms: u64, limit: usize) -> Result<usize, StoreError> {
        self.call(PurgeIdempotency { now_ms, limit }).await
    }

    /// Forgets up to `limit` approvals-feed entries appended before `before_ms`.
    pub async fn purge_feed(&self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        self.call(PurgeFeed { before_ms, limit }).await
    }

    /// Settles every turn no live host owns (see `Recovery`).
    pub async fn recover(&self, boot: Uuid) -> Result<Recovery, StoreError> {
        self.call(Recover(boot)).await
    }

    pub async fn put_api_key(&self, record: ApiKeyRecord) -> Result<(), StoreError> {
        self.call(PutApiKey(record)).await
    }

    /// Revokes a key; refuses (409) to revoke the last platform key.
    pub async fn delete_api_key(&self, id: String) -> Result<ApiKeyRecord, StoreError> {
        self.call(DeleteApiKey(id)).await
    }

    /// Stores a sealed secret (create or rotate); returns it and whether it is new.
    pub async fn put_secret(
        &self,
        record: SecretRecord,
    ) -> Result<(SecretRecord, bool), StoreError> {
        self.call(PutSecret(record)).await
    }

    pub async fn delete_secret(&self, name: String) -> Result<(), StoreError> {
        self.call(DeleteSecret(name)).await
    }

    /// Makes a built deployment its app's current one (rollback or re-activation).
    pub async fn activate(&self, id: Uuid) -> Result<DeploymentRecord, StoreError> {
        self.call(Activate(id)).await
    }

    /// Records a key's last use (the caller rate-limits).
    pub async fn touch_api_key(&self, id: String, at: String) -> Result<(), StoreError> {
        self.call(TouchApiKey(id, at)).await
    }
}

/// The early start of a command whose output holds its turn's `ticket`.
fn early<T>(
    starter: Option<&Arc<Starter>>,
    ticket: fn(&T) -> Option<&TurnTicket>,
) -> Option<EarlyStart<T>> {
    starter.map(|starter| EarlyStart {
        starter: starter.clone(),
        ticket,
    })
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
        permit.send(queued(Append::new(outbox.clone()), reply));
    }
    ack
}
