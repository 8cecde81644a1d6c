//! The single writer: every redb write is a command to one OS thread.
//!
//! The thread takes the first command, drains whatever else is queued (up to
//! `MAX_BATCH`), applies the batch in one write transaction against committed
//! state plus the batch's own pending changes, commits with
//! `Durability::Immediate`, and only then publishes the batch's events to the
//! hub and acknowledges each command. A storage failure fails the whole
//! batch: nothing of it is acknowledged as written or published.
//! Checks that decide an HTTP status (409 on input, version numbers) are
//! commands here, so they cannot race.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use redb::WriteTransaction;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::batch::{Applied, Batch, Reply};
use super::deployments::{activate, create_deployment, finish_build, update_deployment};
use super::error::storage;
use super::outbox::{AppendAck, Outbox};
use super::records::{
    AgentDescription, ApiKeyRecord, Artifact, DeploymentRecord, LimitsRecord, PendingApproval,
    SecretRecord, SessionRecord, SessionStatus,
};
use super::sessions::Recovery;
use super::txn::{load_session, put_api_key, put_json};
use super::{Store, StoreError, tables};

use super::{apikeys, secrets};
use crate::journal::NewEvent;

/// At most this many commands go into one transaction.
const MAX_BATCH: usize = 1024;
/// Commands waiting for the writer before senders wait (backpressure).
const QUEUE: usize = 8192;
/// Sessions the writer keeps cached between batches; past this, the ones
/// without a running turn are dropped (and re-read from redb when needed).
pub(super) const SESSION_CACHE: usize = 4096;

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

enum Command {
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
    tx: mpsc::Sender<Command>,
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
        let (ack, reply) = outbox.push(events);
        if let Some(reply) = reply {
            let outbox = outbox.clone();
            self.tx
                .send(Command::Append { outbox, reply })
                .await
                .map_err(|_| StoreError::WriterGone)?;
        }
        Ok(ack)
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

/// The writer thread's state: the committed view of sessions it has touched.
pub struct Writer {
    store: Store,
    pub(super) sessions: HashMap<Uuid, CachedSession>,
    /// At most this many cached sessions outlive a batch, running ones first.
    session_cache: usize,
    /// Sessions whose running turn lost a write: its next write becomes TURN_ERROR.
    pub(super) broken: HashSet<Uuid>,
}

#[derive(Clone)]
pub(super) struct CachedSession {
    pub(super) record: SessionRecord,
    pub(super) next_seq: u64,
}

impl Writer {
    /// Starts the writer thread.
    pub fn spawn(store: Store) -> std::io::Result<WriterHandle> {
        Writer::spawn_with_session_cache(store, SESSION_CACHE)
    }

    /// `spawn` with another session cache size (the model test evicts on every batch).
    pub(super) fn spawn_with_session_cache(
        store: Store,
        session_cache: usize,
    ) -> std::io::Result<WriterHandle> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let writer = Writer {
            store,
            sessions: HashMap::new(),
            session_cache,
            broken: HashSet::new(),
        };
        std::thread::Builder::new()
            .name("journal-writer".into())
            .spawn(move || writer.run(rx))?;
        Ok(WriterHandle { tx })
    }

    fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        while let Some(first) = rx.blocking_recv() {
            let mut commands = vec![first];
            while commands.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(command) => commands.push(command),
                    Err(_) => break,
                }
            }
            self.apply_batch(commands);
        }
        tracing::debug!("journal writer stopped");
    }

    fn apply_batch(&mut self, commands: Vec<Command>) {
        if self.store.is_degraded() {
            // After a failed commit, writes stop until a restart: nothing
            // half-written is ever acknowledged or streamed.
            let err = StoreError::Storage(
                "storage failed earlier; writes are stopped until the server restarts".into(),
            );
            for command in commands {
                command.fail(&err);
            }
            return;
        }
        let txn = match self.store.db.begin_write() {
            Ok(mut txn) => {
                // Acknowledged means on disk; commits also save the allocator
                // state, so a restart after a crash is fast.
                if let Err(err) = txn.set_durability(redb::Durability::Immediate) {
                    tracing::error!(error = %err, "cannot set immediate durability");
                }
                txn.set_quick_repair(true);
                txn
            }
            Err(err) => {
                let err = storage(err);
                tracing::error!(error = %err, "cannot begin a write transaction");
                self.store.set_degraded();
                for command in commands {
                    command.fail(&err);
                }
                return;
            }
        };
        let metrics = crate::metrics::get();
        metrics.commit_batch.observe(commands.len() as f64);
        let mut batch = Batch::new(&txn, commands.len());
        for command in commands {
            self.apply(&mut batch, command);
        }
        let Applied {
            sessions,
            dirty,
            published,
            running_before,
            replies,
            mut failed,
        } = batch.finish();
        if failed.is_none() {
            let started = std::time::Instant::now();
            failed = persist_sessions(&txn, &sessions, &dirty)
                .and_then(|()| txn.commit().map_err(storage))
                .err();
            metrics.commit.observe(started.elapsed().as_secs_f64());
        }
        match &failed {
            None => {
                metrics.events.inc_by(published.len() as u64);
                self.sessions.extend(sessions);
                if self.sessions.len() > self.session_cache {
                    (self.sessions).retain(|_, s| s.record.status == SessionStatus::Running);
                }
                self.store.hub.publish(&published);
            }
            Some(err) => {
                tracing::error!(error = %err, "journal batch failed; nothing of it was committed");
                if matches!(err, StoreError::Storage(_)) {
                    self.store.set_degraded();
                }
                // Turns that were running before this batch and lost events
                // must not go on as if they had not (their next write is
                // refused and their end becomes TURN_ERROR `storage`).
                drop(sessions);
                self.broken.extend(running_before);
            }
        }
        for reply in replies {
            reply(failed.as_ref());
        }
    }

    fn apply(&mut self, batch: &mut Batch<'_>, command: Command) {
        if let Some(err) = &batch.failed {
            command.fail(err);
            return;
        }
        match command {
            Command::CreateDeployment(new, reply) => {
                let result = create_deployment(batch.txn, new);
                batch.answer(reply, result);
            }
            Command::FinishBuild(id, outcome, reply) => {
                let result = finish_build(batch.txn, id, outcome);
                batch.answer(reply, result);
            }
            Command::SetArtifact(id, artifact, reply) => {
                let result = update_deployment(batch.txn, id, |d| {
                    d.artifact = Some(artifact);
                    Ok(())
                })
                .map(|_| ());
                batch.answer(reply, result);
            }
            Command::CreateSession {
                app,
                route,
                input,
                boot,
                reply,
            } => {
                let result = self.create_session(batch, &app, route, input, boot);
                batch.answer(reply, result);
            }
            Command::PostInput {
                session,
                input,
                boot,
                reply,
            } => {
                let result = self.post_input(batch, session, input, boot);
                batch.answer(reply, result);
            }
            Command::Append { outbox, reply } => {
                let events = outbox.take();
                let result = self.append(batch, outbox.session, outbox.turn, events);
                batch.answer(reply, result);
            }
            Command::FinishTurn {
                session,
                turn,
                events,
                outcome,
                reply,
            } => {
                let result = self.finish_turn(batch, session, turn, events, outcome);
                batch.answer(reply, result);
            }
            Command::Decide {
                session,
                decision,
                boot,
                reply,
            } => {
                let result = self.decide(batch, session, decision, boot);
                batch.answer(reply, result);
            }
            Command::Recover(boot, reply) => {
                let result = self.recover(batch, boot);
                batch.answer(reply, result);
            }
            Command::DeleteApiKey(id, reply) => {
                let result = apikeys::delete_api_key(batch.txn, &id);
                batch.answer(reply, result);
            }
            Command::PutSecret(mut record, reply) => {
                let result = secrets::created_at(batch.txn, &record.name).and_then(|created| {
                    if let Some(created) = created {
                        record.created_at = created;
                    }
                    secrets::put_secret(batch.txn, &record).map(|new| (record, new))
                });
                batch.answer(reply, result);
            }
            Command::DeleteSecret(name, reply) => {
                let result = secrets::delete_secret(batch.txn, &name);
                batch.answer(reply, result);
            }
            Command::Activate(id, reply) => {
                let result = activate(batch.txn, id);
                batch.answer(reply, result);
            }
            Command::TouchApiKey(id, at, reply) => {
                let result = apikeys::touch_api_key(batch.txn, &id, at);
                batch.answer(reply, result);
            }
            Command::PutApiKey(record, reply) => {
                let result = put_api_key(batch.txn, &record);
                batch.answer(reply, result);
            }
        }
    }

    /// The session as the batch sees it (committed state plus the batch's changes).
    pub(super) fn session<'b>(
        &self,
        batch: &'b mut Batch<'_>,
        id: Uuid,
    ) -> Result<&'b mut CachedSession, StoreError> {
        if !batch.sessions.contains_key(&id) {
            let cached = match self.sessions.get(&id) {
                Some(cached) => cached.clone(),
                None => {
                    let txn = batch.txn;
                    load_session(txn, &batch.event_tables()?.events, id)?
                }
            };
            if cached.record.status == SessionStatus::Running {
                batch.running_before.insert(id);
            }
            batch.sessions.insert(id, cached);
        }
        batch
            .sessions
            .get_mut(&id)
            .ok_or_else(|| StoreError::not_found("session", id))
    }
}

impl Command {
    fn fail(self, err: &StoreError) {
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

fn persist_sessions(
    txn: &WriteTransaction,
    sessions: &HashMap<Uuid, CachedSession>,
    dirty: &HashSet<Uuid>,
) -> Result<(), StoreError> {
    for id in dirty {
        if let Some(session) = sessions.get(id) {
            put_json(txn, tables::SESSIONS, id.as_u128(), &session.record)?;
        }
    }
    Ok(())
}
