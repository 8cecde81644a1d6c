//! How a command reaches the writer: the queue, and `WriterHandle`, which
//! sends commands to the writer thread (`writer.rs`) and awaits their
//! replies. A command that starts a turn is answered once the writer
//! started it (`start.rs`): its caller has nothing left to do.
//!
//! A new command is one struct with an `Op` impl (`batch.rs`) beside its
//! rule in `domain/`, and (for convenience) one method here.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::StoreError;
use super::batch::{Batch, Op};
use super::domain::{
    Activate, Answered, Append, BuildOutcome, By, CloseTurn, CreateAppSchedule, CreateDeployment,
    CreateSchedule, CreateSession, Decide, DecideAt, Decision, DecisionAnswer, DeleteApiKey,
    DeleteAppSchedule, DeleteSchedule, DeleteSecret, DeleteSession, DeploymentAnswer, EndSession,
    FinishBuild, FinishTurn, FireSchedule, Fired, Idempotency, InputOutcome, NewDeployment, OnBusy,
    Once, OpenThread, PostInput, PurgeFeed, PurgeIdempotency, PutApiKey, PutSecret, Recover,
    Recovery, ReserveLlm, Reserved, RevokeEndUser, SetArtifact, SetBudget, ThreadTurn, TouchApiKey,
    TurnAnswer, TurnOutcome, TurnTimers,
};
use super::engine::DueSchedule;
use super::outbox::Outbox;
use super::records::{
    ApiKeyRecord, Artifact, DeploymentRecord, ScheduleRecord, SecretRecord, SessionRecord,
};
use super::start::{AppendAck, SinkSlot, TurnSink, TurnTicket};
use crate::journal::payloads::StartReason;
use crate::journal::{NewEvent, TurnErrorKind};

/// Commands waiting for the writer before senders wait (backpressure).
pub(super) const QUEUE: usize = 8192;

pub(super) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// A command in the writer's queue: an `Op`, its latest result and its reply.
pub(super) trait Queued: Send {
    /// Applies the command (unless the batch already failed) and keeps its result.
    fn apply(&mut self, batch: &mut Batch<'_>);
    /// Answers once the batch committed (`failure: None`) or failed.
    fn reply(self: Box<Self>, failure: Option<&StoreError>);
    /// `Op::session`.
    fn session(&self) -> Option<Uuid>;
}

struct Pending<O: Op> {
    op: O,
    result: Option<Result<O::Output, StoreError>>,
    reply: Reply<O::Output>,
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
        if let Ok(output) = &result {
            // Started once the batch is applied or committed (`start.rs`).
            batch.changes.tickets.extend(O::tickets(output));
        }
        self.result = Some(result);
    }

    fn session(&self) -> Option<Uuid> {
        self.op.session()
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
    Box::new(Pending {
        op,
        result: None,
        reply,
    })
}

/// Sends commands to the writer thread. Cheap to clone.
#[derive(Clone)]
pub struct WriterHandle {
    pub(super) tx: mpsc::Sender<Command>,
    /// Where the writer starts the turns it commits (`start.rs`).
    pub(super) turns: Arc<SinkSlot>,
    /// The writer's host (its boot id): the owner of the turns it starts.
    pub(super) boot: Uuid,
}

impl WriterHandle {
    pub(super) async fn call<O: Op>(&self, op: O) -> Result<O::Output, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(queued(op, reply))
            .await
            .map_err(|_| StoreError::WriterGone)?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// From now on the writer starts the turns it commits with `sink`
    /// (the runtime), beginning with those that waited for it (`start.rs`).
    pub(crate) fn start_turns(&self, sink: Arc<dyn TurnSink>) {
        self.turns.set(sink);
    }

    /// The host the writer records as the owner of the turns it starts.
    pub fn boot(&self) -> Uuid {
        self.boot
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

    /// Creates a session pinned to the app's current deployment for `by`
    /// and starts its turn 1, once per idempotency key (`key`; every time
    /// without one): a retry answers the first session (`work: None`).
    pub async fn create_session(
        &self,
        app: String,
        route: String,
        input: Value,
        by: By,
        key: Option<Idempotency>,
    ) -> Result<Answered<(SessionRecord, TurnTicket), SessionRecord>, StoreError> {
        let op = CreateSession {
            app,
            route,
            input,
            by,
            reason: StartReason::Input,
        };
        self.call(Once { op, key }).await
    }

    /// A follow-up input sent by `by`, once per idempotency key: started
    /// (its ticket holds the seq of its `TURN_STARTED`), or, when the
    /// session is busy, refused (409) or queued as `on_busy` says.
    pub async fn input(
        &self,
        session: Uuid,
        input: Value,
        by: By,
        on_busy: OnBusy,
        key: Option<Idempotency>,
    ) -> Result<Answered<InputOutcome, TurnAnswer>, StoreError> {
        let op = PostInput {
            session,
            input,
            on_busy,
            schedule: None,
            by,
        };
        self.call(Once { op, key }).await
    }

    /// An AG-UI run's input on a thread: the next input of the thread's
    /// session, or a new session on the thread's first run.
    pub(crate) async fn open_thread(
        &self,
        app: String,
        route: String,
        thread: String,
        input: Value,
        by: By,
    ) -> Result<ThreadTurn, StoreError> {
        self.call(OpenThread {
            app,
            route,
            thread,
            input,
            by,
        })
        .await
    }

    /// Decides the pending approval whose TOOL_APPROVAL_REQUIRED is at
    /// `approval_seq`, or refuses (409) when another one, or none, is pending.
    pub async fn decide_at(
        &self,
        session: Uuid,
        approval_seq: u64,
        decision: Decision,
    ) -> Result<ThreadTurn, StoreError> {
        self.call(DecideAt {
            session,
            approval_seq,
            decision,
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

    /// Journals a running turn's LLM_CALL with the reservation of its
    /// worst case, or refuses it at the session's LLM budget (nothing
    /// written). Waits for the turn's earlier events first.
    pub(crate) async fn reserve_llm(
        &self,
        outbox: &Arc<Outbox>,
        call: crate::journal::payloads::LlmCall,
        worst: super::records::Spend,
        manifest: Option<super::records::Budget>,
    ) -> Result<Reserved, StoreError> {
        if let Some(ack) = outbox.last_ack() {
            ack.await.map_err(|_| StoreError::WriterGone)??;
        }
        self.call(ReserveLlm {
            outbox: outbox.clone(),
            call,
            worst,
            manifest,
        })
        .await
    }

    /// Sets a session's own LLM budget (`None`: the manifest's); a session
    /// paused at its budget resumes once the new one covers the refused call.
    pub(crate) async fn set_budget(
        &self,
        session: Uuid,
        budget: Option<super::records::Budget>,
        by: By,
    ) -> Result<SessionRecord, StoreError> {
        self.call(SetBudget {
            session,
            budget,
            by,
        })
        .await
        .map(|(record, _)| record)
    }

    /// Journals a turn's last events and releases it, in one commit.
    pub async fn finish_turn(
        &self,
        session: Uuid,
        turn: u32,
        events: Vec<NewEvent>,
        outcome: TurnOutcome,
    ) -> Result<(), StoreError> {
        self.finish_turn_with(session, turn, events, outcome, TurnTimers::default(), 0)
            .await
    }

    /// `finish_turn` with the timers the agent set in the turn, kept only
    /// if the turn ends well (`domain::timers`), of a turn that appended
    /// `appended` bytes of events (their payloads) before its last ones:
    /// they count in the session's journal bytes from now.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn finish_turn_with(
        &self,
        session: Uuid,
        turn: u32,
        events: Vec<NewEvent>,
        outcome: TurnOutcome,
        timers: TurnTimers,
        appended: u64,
    ) -> Result<(), StoreError> {
        self.call(FinishTurn {
            session,
            turn,
            events,
            outcome,
            timers,
            appended,
        })
        .await
        .map(drop)
    }

    /// Journals a decision on the session's pending approval and starts the
    /// resumed turn, once per idempotency key, or refuses (409 when nothing
    /// is pending). Check and decide are one command: of two racing
    /// decisions exactly one wins.
    pub async fn decide(
        &self,
        session: Uuid,
        decision: Decision,
        key: Option<Idempotency>,
    ) -> Result<Answered<TurnTicket, DecisionAnswer>, StoreError> {
        let op = Decide { session, decision };
        self.call(Once { op, key }).await
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
        .map(drop)
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
            idle_before: None,
        })
        .await
    }

    /// Ends a session the idle sweep found idle since before `idle_before`
    /// (`--session-idle-secs`): 409 if it was used meanwhile, or has inputs
    /// queued or schedules set.
    pub async fn end_idle_session(
        &self,
        session: Uuid,
        idle_before: String,
        reason: String,
    ) -> Result<SessionRecord, StoreError> {
        self.call(EndSession {
            session,
            reason: Some(reason),
            key_id: "host".into(),
            idle_before: Some(idle_before),
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

    /// Refuses every token of end user `user_key` (`Principal::key_id`)
    /// issued until now; answers the not-before stored (Unix ms).
    pub(crate) async fn revoke_end_user(&self, user_key: String) -> Result<u64, StoreError> {
        self.call(RevokeEndUser { user_key }).await
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

    /// Adds a schedule to a session, set by `by` (`domain::schedules`).
    pub(crate) async fn create_schedule(
        &self,
        session: Uuid,
        record: ScheduleRecord,
        by: By,
    ) -> Result<ScheduleRecord, StoreError> {
        self.call(CreateSchedule {
            session,
            record,
            by,
        })
        .await
    }

    /// Deletes a schedule that has not fired (404 when there is none).
    pub(crate) async fn delete_schedule(
        &self,
        session: Uuid,
        schedule: Uuid,
    ) -> Result<(), StoreError> {
        self.call(DeleteSchedule { session, schedule }).await
    }

    /// Adds a schedule to an app (`domain::app_schedules`): its id and the schedule.
    pub(crate) async fn create_app_schedule(
        &self,
        app: String,
        record: ScheduleRecord,
    ) -> Result<(Uuid, ScheduleRecord), StoreError> {
        self.call(CreateAppSchedule { app, record }).await
    }

    /// Deletes an app's schedule (404 when there is none).
    pub(crate) async fn delete_app_schedule(
        &self,
        app: String,
        schedule: Uuid,
    ) -> Result<(), StoreError> {
        self.call(DeleteAppSchedule { app, schedule }).await
    }

    /// Fires a due schedule, once: the writer starts its turn or queues it.
    pub(crate) async fn fire_schedule(&self, due: DueSchedule) -> Result<Fired, StoreError> {
        self.call(FireSchedule {
            owner: due.owner,
            schedule: due.schedule,
            due_ms: due.due_ms,
        })
        .await
    }

    /// Forgets up to `limit` idempotency answers expired at `now_ms`.
    pub async fn purge_idempotency(&self, now_ms: u64, limit: usize) -> Result<usize, StoreError> {
        self.call(PurgeIdempotency { now_ms, limit }).await
    }

    /// Forgets up to `limit` approvals-feed entries appended before `before_ms`.
    pub async fn purge_feed(&self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        self.call(PurgeFeed { before_ms, limit }).await
    }

    /// Settles every turn no live host owns, for this host, and starts the
    /// turns it restarts (see `Recovery`).
    pub async fn recover(&self) -> Result<Recovery, StoreError> {
        self.call(Recover).await
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
