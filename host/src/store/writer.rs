//! The single writer: every write is a command to one OS thread.
//!
//! The thread takes the first command, drains whatever else is queued (up to
//! `MAX_BATCH`), applies the batch in one write transaction of the engine
//! against committed state plus the batch's own pending changes, commits
//! durably, and only then publishes the batch's events to the hub and
//! acknowledges each command. A failed transaction fails the whole batch:
//! nothing of it is acknowledged as written or published. Checks that
//! decide an HTTP status (409 on input, version numbers) are commands here,
//! so they cannot race. The commands are in `domain/`, the way they travel
//! in `commands.rs`.
//!
//! The writer starts the turns its batches journal (each command's output
//! declares its tickets): on an engine that applies a batch once (redb),
//! once it is applied, during its commit; otherwise once it committed, before
//! the commands are answered (`start.rs`, where the invariant lives).

use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use std::collections::HashSet;
use std::sync::Arc;

use super::batch::{Batch, Changes, Quotas, WriterState};
use super::commands::{Command, QUEUE, WriterHandle};
use super::domain::enqueue_webhooks;
use super::engine::WriteEngine;
use super::start::{AppendAck, Committed, SinkSlot, append_ack};
use super::{CurrentRedactor, Db, StoreError};

/// At most this many commands go into one transaction.
const MAX_BATCH: usize = 1024;

/// The writer thread: the engine's write side and what it remembers between batches.
pub struct Writer {
    store: Db,
    engine: Box<dyn WriteEngine>,
    state: WriterState,
    turns: Arc<SinkSlot>,
}

impl Writer {
    /// Starts a writer thread that checks no turn's owner and starts no
    /// turns until it is given a sink (tests, benches).
    pub fn spawn(store: Db) -> Result<WriterHandle, StoreError> {
        Writer::start(store, WriterState::unfenced(), SinkSlot::ignoring())
    }

    /// Starts the writer thread of host `host` (its boot id): the turns it
    /// commits are this host's, they start once the runtime gave its sink
    /// (`WriterHandle::start_turns`), and a turn's events are refused
    /// unless the turn is this host's. `redact` takes
    /// the server's secret values out of the texts the writer rebuilds when
    /// it closes a turn itself (after a crash, or a turn's failed write).
    /// `quotas` are the per-app caps its session commands check.
    pub(crate) fn spawn_for_host(
        store: Db,
        host: uuid::Uuid,
        redact: CurrentRedactor,
        quotas: Quotas,
    ) -> Result<WriterHandle, StoreError> {
        let state = WriterState {
            boot: host,
            fenced: true,
            redact: Some(redact),
            broken: HashSet::new(),
            quotas,
        };
        Writer::start(store, state, SinkSlot::waiting())
    }

    fn start(
        store: Db,
        state: WriterState,
        turns: Arc<SinkSlot>,
    ) -> Result<WriterHandle, StoreError> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let boot = state.boot;
        let writer = Writer {
            engine: store.engine.write_engine()?,
            store,
            state,
            turns: turns.clone(),
        };
        std::thread::Builder::new()
            .name("journal-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| StoreError::Storage(format!("cannot start the writer thread: {e}")))?;
        Ok(WriterHandle { tx, turns, boot })
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

    fn apply_batch(&mut self, mut commands: Vec<Command>) {
        if self.store.is_degraded() {
            // After a failed commit, writes stop until a restart: nothing
            // half-written is ever acknowledged or streamed.
            let err = StoreError::Storage(
                "storage failed earlier; writes are stopped until the server restarts".into(),
            );
            for command in commands {
                command.reply(Some(&err));
            }
            return;
        }
        let metrics = crate::metrics::get();
        metrics.commit_batch.observe(commands.len() as f64);
        let Writer {
            engine,
            state,
            turns,
            ..
        } = self;
        let mut changes = Changes::default();
        let mut sessions: Vec<Uuid> = commands.iter().filter_map(|c| c.session()).collect();
        let early = engine.applies_once();
        // What the batch's early-started turns wait for before they read.
        let mut committed: Option<(oneshot::Sender<Result<(), StoreError>>, AppendAck)> = None;
        let mut tickets = Vec::new();
        let result = engine.transact(&mut |tx| {
            tx.lock_sessions(&mut sessions)?;
            let mut batch = Batch::new(tx, state);
            for command in commands.iter_mut() {
                command.apply(&mut batch);
            }
            if !batch.failed()
                && let Err(err) = enqueue_webhooks(&mut batch)
            {
                // The deliveries are part of the batch: without them, nothing.
                batch.fail(err);
            }
            changes = batch.finish();
            if let Some(err) = &changes.failed {
                return Err(err.clone());
            }
            tickets = std::mem::take(&mut changes.tickets);
            if early && !tickets.is_empty() {
                // Applied once, and its commit is next: the turns start now.
                let (_, ack) = committed.get_or_insert_with(append_ack);
                turns.start(std::mem::take(&mut tickets), Some(&Committed(ack.clone())));
            }
            Ok(())
        });
        if commands.len() > 1 && !early && matches!(result, Err(StoreError::Unstorable(_))) {
            // One command's data could not be stored (PostgreSQL refuses
            // text holding a NUL) and nothing of the batch was committed:
            // apply each command alone, so only that one fails.
            tracing::warn!(
                commands = commands.len(),
                "a batch was refused for one command's data; applying its commands one by one"
            );
            for command in commands {
                self.apply_batch(vec![command]);
            }
            return;
        }
        let Changes {
            published,
            running_before,
            unbroken,
            deleted,
            feed_head,
            ..
        } = changes;
        state.broken.retain(|id| !unbroken.contains(id));
        match &result {
            Ok(()) => {
                metrics.events.inc_by(published.len() as u64);
                self.store.hub.publish(&published);
                for session in deleted {
                    self.store.hub.close(session);
                }
                if let Some(head) = feed_head {
                    self.store.hub.feed_advanced(head);
                }
                // Committed (on an engine that may apply twice, only now):
                // the turns start before their commands are answered.
                turns.start(tickets, None);
            }
            Err(err) => {
                tracing::error!(error = %err, "journal batch failed; nothing of it was committed");
                if matches!(err, StoreError::Storage(_)) {
                    self.store.set_degraded();
                }
                // Turns that were running before this batch and lost events
                // must not go on as if they had not (their next write is
                // refused and their end becomes TURN_ERROR `storage`).
                state.broken.extend(running_before);
            }
        }
        let failure = result.err();
        if let Some((tx, _)) = committed {
            let _ = tx.send(failure.clone().map_or(Ok(()), Err));
        }
        for command in commands {
            command.reply(failure.as_ref());
        }
    }
}
