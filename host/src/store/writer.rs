//! The single writer: every redb write is a command to one OS thread.
//!
//! The thread takes the first command, drains whatever else is queued (up to
//! `MAX_BATCH`), applies the batch in one write transaction against committed
//! state plus the batch's own pending changes, commits with
//! `Durability::Immediate`, and only then publishes the batch's events to the
//! hub and acknowledges each command. A storage failure fails the whole
//! batch: nothing of it is acknowledged as written or published.
//! Checks that decide an HTTP status (409 on input, version numbers) are
//! commands here, so they cannot race. The commands and the handle that
//! sends them are in `commands.rs`.

use std::collections::{HashMap, HashSet};

use redb::WriteTransaction;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::batch::{Batch, Changes};
use super::commands::{Command, QUEUE, WriterHandle};
use super::deployments::{activate, create_deployment, finish_build, update_deployment};
use super::error::storage;
use super::records::{SessionRecord, SessionStatus};
use super::recovery::Redact;
use super::txn::{load_session, put_api_key, put_json};
use super::{Store, StoreError, tables};
use super::{apikeys, secrets};

/// At most this many commands go into one transaction.
const MAX_BATCH: usize = 1024;
/// Sessions the writer keeps cached between batches; past this, the ones
/// without a running turn are dropped (and re-read from redb when needed).
pub(super) const SESSION_CACHE: usize = 4096;

/// The writer thread's state: the committed view of sessions it has touched.
pub struct Writer {
    store: Store,
    pub(super) sessions: HashMap<Uuid, CachedSession>,
    /// At most this many cached sessions outlive a batch, running ones first.
    session_cache: usize,
    /// Takes secret values out of message texts the writer rebuilds from
    /// deltas when it closes a turn itself (`recovery::closing_events`).
    pub(super) redact: Option<Redact>,
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
        Writer::start(store, SESSION_CACHE, None)
    }

    /// `spawn`, with the server's secret values taken out of the texts the
    /// writer rebuilds when it closes a turn itself (after a crash, or a
    /// turn's failed write).
    pub fn spawn_redacting(store: Store, redact: Redact) -> std::io::Result<WriterHandle> {
        Writer::start(store, SESSION_CACHE, Some(redact))
    }

    /// `spawn` with another session cache size (the model test evicts on every batch).
    #[cfg(test)]
    pub(super) fn spawn_with_session_cache(
        store: Store,
        session_cache: usize,
    ) -> std::io::Result<WriterHandle> {
        Writer::start(store, session_cache, None)
    }

    fn start(
        store: Store,
        session_cache: usize,
        redact: Option<Redact>,
    ) -> std::io::Result<WriterHandle> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let writer = Writer {
            store,
            sessions: HashMap::new(),
            session_cache,
            redact,
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
        let Changes {
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
        if let Some(err) = &batch.changes.failed {
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
        if !batch.changes.sessions.contains_key(&id) {
            let cached = match self.sessions.get(&id) {
                Some(cached) => cached.clone(),
                None => {
                    let txn = batch.txn;
                    load_session(txn, &batch.event_tables()?.events, id)?
                }
            };
            if cached.record.status == SessionStatus::Running {
                batch.changes.running_before.insert(id);
            }
            batch.changes.sessions.insert(id, cached);
        }
        (batch.changes.sessions)
            .get_mut(&id)
            .ok_or_else(|| StoreError::not_found("session", id))
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
