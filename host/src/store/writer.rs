//! The single writer: every redb write is a command to one OS thread.
//!
//! The thread takes the first command, drains whatever else is queued (up to
//! `MAX_BATCH`), applies the batch in one write transaction against committed
//! state plus the batch's own pending changes, commits with
//! `Durability::Immediate`, and only then acknowledges each command and
//! publishes the batch's events to the hub. A storage failure fails the whole
//! batch: nothing of it is acknowledged as written or published.
//! Checks that decide an HTTP status (409 on input, version numbers) are
//! commands here, so they cannot race.

use std::collections::{HashMap, HashSet};

use redb::{ReadableTable, WriteTransaction};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::error::{corrupt, storage};
use super::records::{
    AgentDescription, ApiKeyRecord, AppRecord, Artifact, DeploymentRecord, DeploymentStatus,
    SessionRecord, SessionStatus,
};
use super::{Store, StoreError, now_rfc3339, recovery, tables};
use crate::journal::{EventType, NewEvent, StoredEvent, encode_record};

/// At most this many commands go into one transaction.
const MAX_BATCH: usize = 1024;
/// Commands waiting for the writer before senders wait (backpressure).
const QUEUE: usize = 8192;

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// A deployment to register (the writer assigns the version).
#[derive(Debug, Clone)]
pub struct NewDeployment {
    pub app_slug: String,
    /// A version pinned by the manifest; refused when it exists.
    pub version: Option<u64>,
    pub manifest: String,
    pub entry: String,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    Ended,
    Errored,
    SessionEnded,
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
    Append {
        session: Uuid,
        turn: u32,
        events: Vec<NewEvent>,
        reply: Reply<()>,
    },
    FinishTurn {
        session: Uuid,
        turn: u32,
        events: Vec<NewEvent>,
        outcome: TurnOutcome,
        reply: Reply<()>,
    },
    CloseInterrupted(Uuid, Reply<Vec<Uuid>>),
    PutApiKey(ApiKeyRecord, Reply<()>),
}

/// Sends commands to the writer thread. Cheap to clone.
#[derive(Clone)]
pub struct WriterHandle {
    tx: mpsc::Sender<Command>,
}

/// A pending acknowledgement of an `append`.
pub type AppendAck = oneshot::Receiver<Result<(), StoreError>>;

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

    /// Queues events of a running turn without waiting for their commit;
    /// the returned ack resolves once they are committed (or failed).
    pub async fn append(
        &self,
        session: Uuid,
        turn: u32,
        events: Vec<NewEvent>,
    ) -> Result<AppendAck, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Command::Append {
                session,
                turn,
                events,
                reply,
            })
            .await
            .map_err(|_| StoreError::WriterGone)?;
        Ok(rx)
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

    /// Closes with TURN_ERROR every turn left running by an earlier process.
    pub async fn close_interrupted(&self, boot: Uuid) -> Result<Vec<Uuid>, StoreError> {
        self.call(|r| Command::CloseInterrupted(boot, r)).await
    }

    pub async fn put_api_key(&self, record: ApiKeyRecord) -> Result<(), StoreError> {
        self.call(|r| Command::PutApiKey(record, r)).await
    }
}

/// The writer thread's state: the committed view of sessions it has touched.
pub struct Writer {
    store: Store,
    sessions: HashMap<Uuid, CachedSession>,
    /// Sessions whose running turn lost a write: its next write becomes TURN_ERROR.
    broken: HashSet<Uuid>,
}

#[derive(Clone)]
struct CachedSession {
    record: SessionRecord,
    next_seq: u64,
}

/// A command's answer, sent once its batch committed (or failed).
type DeferredReply = Box<dyn FnOnce(Option<&StoreError>) + Send>;

/// One transaction's worth of commands.
struct Batch {
    txn: WriteTransaction,
    sessions: HashMap<Uuid, CachedSession>,
    dirty: HashSet<Uuid>,
    published: Vec<(Uuid, StoredEvent)>,
    replies: Vec<DeferredReply>,
    failed: Option<StoreError>,
}

impl Writer {
    /// Starts the writer thread.
    pub fn spawn(store: Store) -> std::io::Result<WriterHandle> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let writer = Writer {
            store,
            sessions: HashMap::new(),
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
        let txn = match self.store.db.begin_write() {
            Ok(txn) => txn,
            Err(err) => {
                let err = storage(err);
                tracing::error!(error = %err, "cannot begin a write transaction");
                for command in commands {
                    command.fail(&err);
                }
                return;
            }
        };
        let mut batch = Batch {
            txn,
            sessions: HashMap::new(),
            dirty: HashSet::new(),
            published: Vec::new(),
            replies: Vec::with_capacity(commands.len()),
            failed: None,
        };
        for command in commands {
            self.apply(&mut batch, command);
        }
        let Batch {
            txn,
            sessions,
            dirty,
            published,
            replies,
            mut failed,
        } = batch;
        if failed.is_none() {
            failed = persist_sessions(&txn, &sessions, &dirty)
                .and_then(|()| txn.commit().map_err(storage))
                .err();
        }
        match &failed {
            None => {
                self.sessions.extend(sessions);
                self.store.hub.publish(&published);
            }
            Some(err) => {
                tracing::error!(error = %err, "journal batch failed; nothing of it was committed");
                // Running turns that lost events must not go on as if they had not.
                self.broken.extend(
                    sessions
                        .iter()
                        .filter(|(_, s)| s.record.status == SessionStatus::Running)
                        .map(|(id, _)| *id),
                );
            }
        }
        for reply in replies {
            reply(failed.as_ref());
        }
    }

    fn apply(&mut self, batch: &mut Batch, command: Command) {
        if let Some(err) = &batch.failed {
            command.fail(err);
            return;
        }
        match command {
            Command::CreateDeployment(new, reply) => {
                let result = create_deployment(&batch.txn, new);
                batch.answer(reply, result);
            }
            Command::FinishBuild(id, outcome, reply) => {
                let result = finish_build(&batch.txn, id, outcome);
                batch.answer(reply, result);
            }
            Command::SetArtifact(id, artifact, reply) => {
                let result = update_deployment(&batch.txn, id, |d| {
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
            Command::Append {
                session,
                turn,
                events,
                reply,
            } => {
                let result = self.append(batch, session, turn, events);
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
            Command::CloseInterrupted(boot, reply) => {
                let result = self.close_interrupted(batch, boot);
                batch.answer(reply, result);
            }
            Command::PutApiKey(record, reply) => {
                let result = put_api_key(&batch.txn, &record);
                batch.answer(reply, result);
            }
        }
    }

    /// The session as the batch sees it (committed state plus the batch's changes).
    fn session<'b>(
        &self,
        batch: &'b mut Batch,
        id: Uuid,
    ) -> Result<&'b mut CachedSession, StoreError> {
        if !batch.sessions.contains_key(&id) {
            let cached = match self.sessions.get(&id) {
                Some(cached) => cached.clone(),
                None => load_session(&batch.txn, id)?,
            };
            batch.sessions.insert(id, cached);
        }
        batch
            .sessions
            .get_mut(&id)
            .ok_or_else(|| StoreError::not_found("session", id))
    }

    fn create_session(
        &mut self,
        batch: &mut Batch,
        app: &str,
        route: String,
        input: Value,
        boot: Uuid,
    ) -> Result<(SessionRecord, TurnTicket), StoreError> {
        let app = find_app(&batch.txn, app)?.ok_or_else(|| StoreError::not_found("app", app))?;
        let deployment_id = app.current_deployment.ok_or_else(|| {
            StoreError::Conflict(format!(
                "app `{}` has no active deployment yet: deploy it first",
                app.slug
            ))
        })?;
        let deployment =
            get_json::<DeploymentRecord>(&batch.txn, tables::DEPLOYMENTS, deployment_id)?
                .ok_or_else(|| corrupt(format!("current deployment {deployment_id} is missing")))?;
        let routes = deployment
            .description
            .as_ref()
            .map(|d| d.routes.as_slice())
            .unwrap_or_default();
        if !routes.contains(&route) {
            return Err(StoreError::NotFound {
                what: "route",
                key: format!(
                    "{route}` (app `{}` serves: {})",
                    app.slug,
                    routes.join(", ")
                ),
            });
        }
        let now = now_rfc3339();
        let id = Uuid::now_v7();
        let record = SessionRecord {
            id,
            app_id: app.id,
            app_slug: app.slug.clone(),
            route: route.clone(),
            deployment_id,
            deployment_version: deployment.version,
            status: SessionStatus::Running,
            turn: 1,
            created_at: now.clone(),
            updated_at: now,
            boot_id: Some(boot),
        };
        let mut events = vec![NewEvent::new(
            EventType::SessionCreated,
            json!({
                "app_id": app.id,
                "app": app.slug,
                "route": route,
                "deployment_id": deployment_id,
                "deployment_version": deployment.version,
                "input": input,
            }),
        )];
        events.extend(turn_start_events(1, &input));
        let mut next_seq = 0;
        write_events(&batch.txn, &mut batch.published, id, &mut next_seq, events)?;
        batch.sessions.insert(
            id,
            CachedSession {
                record: record.clone(),
                next_seq,
            },
        );
        batch.dirty.insert(id);
        let ticket = TurnTicket {
            session_id: id,
            turn: 1,
            deployment_id,
            app_slug: app.slug,
            route,
            input,
            reason: TurnReason::Input,
        };
        Ok((record, ticket))
    }

    fn post_input(
        &mut self,
        batch: &mut Batch,
        id: Uuid,
        input: Value,
        boot: Uuid,
    ) -> Result<TurnTicket, StoreError> {
        let session = self.session(batch, id)?;
        match session.record.status {
            SessionStatus::Idle | SessionStatus::Errored => {}
            SessionStatus::Running => {
                return Err(StoreError::Conflict(
                    "a turn is in progress: send the input after its TURN_ENDED or TURN_ERROR"
                        .into(),
                ));
            }
            SessionStatus::AwaitingApproval => {
                return Err(StoreError::Conflict(
                    "the session is awaiting an approval decision: decide it first".into(),
                ));
            }
            SessionStatus::Ended => {
                return Err(StoreError::Conflict(
                    "the session has ended and accepts no more input".into(),
                ));
            }
        }
        let turn = session.record.turn + 1;
        let mut next_seq = session.next_seq;
        write_events(
            &batch.txn,
            &mut batch.published,
            id,
            &mut next_seq,
            turn_start_events(turn, &input),
        )?;
        let session = self.session(batch, id)?;
        session.next_seq = next_seq;
        session.record.turn = turn;
        session.record.status = SessionStatus::Running;
        session.record.boot_id = Some(boot);
        session.record.updated_at = now_rfc3339();
        let ticket = TurnTicket {
            session_id: id,
            turn,
            deployment_id: session.record.deployment_id,
            app_slug: session.record.app_slug.clone(),
            route: session.record.route.clone(),
            input,
            reason: TurnReason::Input,
        };
        batch.dirty.insert(id);
        Ok(ticket)
    }

    /// Checks that `turn` is the session's running turn.
    fn running_turn(&self, batch: &mut Batch, id: Uuid, turn: u32) -> Result<u64, StoreError> {
        let session = self.session(batch, id)?;
        if session.record.status != SessionStatus::Running || session.record.turn != turn {
            return Err(StoreError::Conflict(format!(
                "turn {turn} of session {id} is not running"
            )));
        }
        Ok(session.next_seq)
    }

    fn append(
        &mut self,
        batch: &mut Batch,
        id: Uuid,
        turn: u32,
        events: Vec<NewEvent>,
    ) -> Result<(), StoreError> {
        let mut next_seq = self.running_turn(batch, id, turn)?;
        if self.broken.contains(&id) {
            return Err(StoreError::Storage(
                "an earlier write of this turn failed; the turn cannot go on".into(),
            ));
        }
        write_events(&batch.txn, &mut batch.published, id, &mut next_seq, events)?;
        self.session(batch, id)?.next_seq = next_seq;
        Ok(())
    }

    fn finish_turn(
        &mut self,
        batch: &mut Batch,
        id: Uuid,
        turn: u32,
        mut events: Vec<NewEvent>,
        mut outcome: TurnOutcome,
    ) -> Result<(), StoreError> {
        let mut next_seq = self.running_turn(batch, id, turn)?;
        if self.broken.contains(&id) {
            // Some of this turn's events were never committed: say so instead.
            events = recovery::closing_events(
                &batch.txn,
                id,
                turn,
                "storage",
                "the host could not record part of this turn",
            )?;
            outcome = TurnOutcome::Errored;
        }
        write_events(&batch.txn, &mut batch.published, id, &mut next_seq, events)?;
        let session = self.session(batch, id)?;
        session.next_seq = next_seq;
        session.record.status = match outcome {
            TurnOutcome::Ended => SessionStatus::Idle,
            TurnOutcome::Errored => SessionStatus::Errored,
            TurnOutcome::SessionEnded => SessionStatus::Ended,
        };
        session.record.boot_id = None;
        session.record.updated_at = now_rfc3339();
        batch.dirty.insert(id);
        self.broken.remove(&id);
        Ok(())
    }

    fn close_interrupted(
        &mut self,
        batch: &mut Batch,
        boot: Uuid,
    ) -> Result<Vec<Uuid>, StoreError> {
        let mut stale = Vec::new();
        {
            let table = batch.txn.open_table(tables::SESSIONS).map_err(storage)?;
            for row in table.iter().map_err(storage)? {
                let (_, v) = row.map_err(storage)?;
                let record: SessionRecord = serde_json::from_slice(v.value()).map_err(corrupt)?;
                if record.status == SessionStatus::Running && record.boot_id != Some(boot) {
                    stale.push((record.id, record.turn));
                }
            }
        }
        for (id, turn) in &stale {
            let events = recovery::closing_events(
                &batch.txn,
                *id,
                *turn,
                "host_restarted",
                "the host stopped while this turn was running; send a new input to continue",
            )?;
            self.finish_turn(batch, *id, *turn, events, TurnOutcome::Errored)?;
        }
        Ok(stale.into_iter().map(|(id, _)| id).collect())
    }
}

impl Batch {
    /// Queues the reply of one command until the batch commits (or fails).
    fn answer<T: Send + 'static>(&mut self, reply: Reply<T>, result: Result<T, StoreError>) {
        if let Err(err @ (StoreError::Storage(_) | StoreError::Corrupt(_))) = &result {
            // The transaction may hold part of this command: fail the whole batch.
            self.failed = Some(err.clone());
        }
        self.replies.push(Box::new(move |failure| {
            let result = match (failure, result) {
                (Some(err), Ok(_)) => Err(err.clone()),
                (_, result) => result,
            };
            // The caller may have gone away (client disconnected); that is fine.
            let _ = reply.send(result);
        }));
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
            Command::Append { reply, .. } => drop(reply.send(Err(err))),
            Command::FinishTurn { reply, .. } => drop(reply.send(Err(err))),
            Command::CloseInterrupted(_, r) => drop(r.send(Err(err))),
            Command::PutApiKey(_, r) => drop(r.send(Err(err))),
        }
    }
}

/// TURN_STARTED, then the input as a user message when it is text.
fn turn_start_events(turn: u32, input: &Value) -> Vec<NewEvent> {
    let mut events = vec![NewEvent::new(
        EventType::TurnStarted,
        json!({"turn": turn, "reason": {"kind": "input"}, "input": input}),
    )];
    if let Some(text) = input_text(input) {
        let message_id = format!("msg_{}", Uuid::now_v7().simple());
        events.push(NewEvent::new(
            EventType::MessageStart,
            json!({"message_id": message_id, "role": "user"}),
        ));
        events.push(NewEvent::new(
            EventType::MessageDelta,
            json!({"message_id": message_id, "delta": {"type": "text", "text": text}}),
        ));
        events.push(NewEvent::new(
            EventType::MessageEnd,
            json!({"message_id": message_id, "role": "user", "text": text}),
        ));
    }
    events
}

/// The text of a text input: a JSON string, or an object's string field `text`.
pub fn input_text(input: &Value) -> Option<&str> {
    match input {
        Value::String(text) => Some(text),
        Value::Object(map) => map.get("text").and_then(Value::as_str),
        _ => None,
    }
}

fn write_events(
    txn: &WriteTransaction,
    published: &mut Vec<(Uuid, StoredEvent)>,
    session: Uuid,
    next_seq: &mut u64,
    events: Vec<NewEvent>,
) -> Result<(), StoreError> {
    let created_at = now_rfc3339();
    let mut table = txn.open_table(tables::EVENTS).map_err(storage)?;
    let mut ids = txn.open_table(tables::EVENT_IDS).map_err(storage)?;
    for event in events {
        let seq = *next_seq;
        let id = Uuid::now_v7();
        let (record, json) =
            encode_record(id, seq, session, &event, &created_at).map_err(corrupt)?;
        table
            .insert((session.as_u128(), seq), record.as_slice())
            .map_err(storage)?;
        ids.insert(id.as_u128(), (session.as_u128(), seq))
            .map_err(storage)?;
        *next_seq += 1;
        published.push((
            session,
            StoredEvent {
                id,
                seq,
                json: json.into(),
            },
        ));
    }
    Ok(())
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

fn load_session(txn: &WriteTransaction, id: Uuid) -> Result<CachedSession, StoreError> {
    let record: SessionRecord =
        get_json(txn, tables::SESSIONS, id)?.ok_or_else(|| StoreError::not_found("session", id))?;
    let events = txn.open_table(tables::EVENTS).map_err(storage)?;
    let key = id.as_u128();
    let next_seq = match events
        .range((key, 0)..=(key, u64::MAX))
        .map_err(storage)?
        .next_back()
    {
        Some(row) => row.map_err(storage)?.0.value().1 + 1,
        None => 0,
    };
    Ok(CachedSession { record, next_seq })
}

fn get_json<T: serde::de::DeserializeOwned>(
    txn: &WriteTransaction,
    table: redb::TableDefinition<u128, &[u8]>,
    id: Uuid,
) -> Result<Option<T>, StoreError> {
    let table = txn.open_table(table).map_err(storage)?;
    let value = table.get(id.as_u128()).map_err(storage)?;
    match value {
        Some(v) => serde_json::from_slice(v.value()).map(Some).map_err(corrupt),
        None => Ok(None),
    }
}

fn put_api_key(txn: &WriteTransaction, record: &ApiKeyRecord) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec(record).map_err(corrupt)?;
    let mut table = txn.open_table(tables::API_KEYS).map_err(storage)?;
    table
        .insert(record.id.as_str(), bytes.as_slice())
        .map_err(storage)?;
    Ok(())
}

fn put_json(
    txn: &WriteTransaction,
    table: redb::TableDefinition<u128, &[u8]>,
    key: u128,
    value: &impl serde::Serialize,
) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec(value).map_err(corrupt)?;
    let mut table = txn.open_table(table).map_err(storage)?;
    table.insert(key, bytes.as_slice()).map_err(storage)?;
    Ok(())
}

fn find_app(txn: &WriteTransaction, id_or_slug: &str) -> Result<Option<AppRecord>, StoreError> {
    let id = match Uuid::parse_str(id_or_slug) {
        Ok(id) => id,
        Err(_) => {
            let slugs = txn.open_table(tables::APP_SLUGS).map_err(storage)?;
            let id = slugs.get(id_or_slug).map_err(storage)?.map(|v| v.value());
            match id {
                Some(id) => Uuid::from_u128(id),
                None => return Ok(None),
            }
        }
    };
    get_json(txn, tables::APPS, id)
}

fn create_deployment(
    txn: &WriteTransaction,
    new: NewDeployment,
) -> Result<DeploymentRecord, StoreError> {
    let now = now_rfc3339();
    let app = match find_app(txn, &new.app_slug)? {
        Some(app) => app,
        None => {
            let app = AppRecord {
                id: Uuid::now_v7(),
                slug: new.app_slug.clone(),
                created_at: now.clone(),
                current_deployment: None,
            };
            put_json(txn, tables::APPS, app.id.as_u128(), &app)?;
            let mut slugs = txn.open_table(tables::APP_SLUGS).map_err(storage)?;
            slugs
                .insert(app.slug.as_str(), app.id.as_u128())
                .map_err(storage)?;
            app
        }
    };
    let key = app.id.as_u128();
    let mut index = txn.open_table(tables::APP_DEPLOYMENTS).map_err(storage)?;
    let version = match new.version {
        Some(0) => return Err(StoreError::Rejected("version must be 1 or more".into())),
        Some(v) => {
            if index.get((key, v)).map_err(storage)?.is_some() {
                return Err(StoreError::Rejected(format!(
                    "version {v} of app `{}` already exists",
                    app.slug
                )));
            }
            v
        }
        None => match index
            .range((key, 0)..=(key, u64::MAX))
            .map_err(storage)?
            .next_back()
        {
            Some(row) => row.map_err(storage)?.0.value().1 + 1,
            None => 1,
        },
    };
    let record = DeploymentRecord {
        id: Uuid::now_v7(),
        app_id: app.id,
        version,
        status: DeploymentStatus::Building,
        created_at: now,
        finished_at: None,
        error: None,
        manifest: new.manifest,
        entry: new.entry,
        description: None,
        artifact: None,
    };
    index
        .insert((key, version), record.id.as_u128())
        .map_err(storage)?;
    drop(index);
    put_json(txn, tables::DEPLOYMENTS, record.id.as_u128(), &record)?;
    Ok(record)
}

fn update_deployment(
    txn: &WriteTransaction,
    id: Uuid,
    change: impl FnOnce(&mut DeploymentRecord) -> Result<(), StoreError>,
) -> Result<DeploymentRecord, StoreError> {
    let mut record: DeploymentRecord = get_json(txn, tables::DEPLOYMENTS, id)?
        .ok_or_else(|| StoreError::not_found("deployment", id))?;
    change(&mut record)?;
    put_json(txn, tables::DEPLOYMENTS, id.as_u128(), &record)?;
    Ok(record)
}

fn finish_build(
    txn: &WriteTransaction,
    id: Uuid,
    outcome: BuildOutcome,
) -> Result<DeploymentRecord, StoreError> {
    let record: DeploymentRecord = get_json(txn, tables::DEPLOYMENTS, id)?
        .ok_or_else(|| StoreError::not_found("deployment", id))?;
    if record.status != DeploymentStatus::Building {
        return Err(StoreError::Conflict(format!(
            "deployment {id} is not building"
        )));
    }
    let now = now_rfc3339();
    match outcome {
        BuildOutcome::Failed(error) => update_deployment(txn, id, |d| {
            d.status = DeploymentStatus::Failed;
            d.error = Some(error);
            d.finished_at = Some(now);
            Ok(())
        }),
        BuildOutcome::Succeeded {
            description,
            artifact,
        } => {
            let mut app: AppRecord = get_json(txn, tables::APPS, record.app_id)?
                .ok_or_else(|| corrupt(format!("app {} is missing", record.app_id)))?;
            let current = match app.current_deployment {
                Some(current) => get_json::<DeploymentRecord>(txn, tables::DEPLOYMENTS, current)?,
                None => None,
            };
            // The newest successful deployment is current: a slow older build
            // finishing after a newer one never goes live.
            let becomes_current = current.as_ref().is_none_or(|c| c.version < record.version);
            if becomes_current {
                if let Some(previous) = current {
                    update_deployment(txn, previous.id, |d| {
                        d.status = DeploymentStatus::Retired;
                        Ok(())
                    })?;
                }
                app.current_deployment = Some(id);
                put_json(txn, tables::APPS, app.id.as_u128(), &app)?;
            }
            update_deployment(txn, id, |d| {
                d.status = if becomes_current {
                    DeploymentStatus::Active
                } else {
                    DeploymentStatus::Retired
                };
                d.description = Some(description);
                d.artifact = Some(artifact);
                d.finished_at = Some(now);
                Ok(())
            })
        }
    }
}
