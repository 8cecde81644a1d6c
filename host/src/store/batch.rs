//! One write transaction's worth of writer commands: the transaction, the
//! sessions it changed, the events it wrote (published after the commit) and
//! the replies it owes (sent after the commit).
//!
//! The journal's two tables are opened once per batch and kept open: every
//! command of the batch that reads or writes events goes through
//! `Batch::event_tables` (redb refuses to open a table twice in one
//! transaction, and opening it per command cost ~6% of the writer's time).

use std::collections::{HashMap, HashSet};

use redb::{Table, WriteTransaction};
use tokio::sync::oneshot;
use uuid::Uuid;

use super::error::storage;
use super::writer::CachedSession;
use super::{StoreError, now_rfc3339, tables};
use crate::journal::{NewEvent, StoredEvent, encode_record};

/// The journal table, as a batch has it open.
pub(super) type EventsTable<'t> = Table<'t, (u128, u64), &'static [u8]>;

/// The journal's tables, open for the batch's whole transaction.
pub(super) struct EventTables<'t> {
    pub(super) events: EventsTable<'t>,
    pub(super) ids: Table<'t, u128, (u128, u64)>,
}

/// A command's answer, sent once its batch committed (or failed).
pub(super) type DeferredReply = Box<dyn FnOnce(Option<&StoreError>) + Send>;

pub(super) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

pub(super) struct Batch<'t> {
    pub(super) txn: &'t WriteTransaction,
    tables: Option<EventTables<'t>>,
    /// The `created_at` of every event of the batch: when the writer took it.
    created_at: String,
    pub(super) changes: Changes,
}

/// What a batch's commands changed and owe; all that is left of the batch
/// once they are applied (no borrow of the transaction, so it can commit).
#[derive(Default)]
pub(super) struct Changes {
    /// The batch's view of every session it touched.
    pub(super) sessions: HashMap<Uuid, CachedSession>,
    /// Sessions whose record must be saved before the commit.
    pub(super) dirty: HashSet<Uuid>,
    /// Events to publish once committed, in commit order.
    pub(super) published: Vec<(Uuid, StoredEvent)>,
    /// Sessions whose committed state, when the batch first touched them, was a running turn.
    pub(super) running_before: HashSet<Uuid>,
    pub(super) replies: Vec<DeferredReply>,
    pub(super) failed: Option<StoreError>,
}

impl<'t> Batch<'t> {
    pub(super) fn new(txn: &'t WriteTransaction, commands: usize) -> Self {
        Batch {
            txn,
            tables: None,
            created_at: now_rfc3339(),
            changes: Changes {
                replies: Vec::with_capacity(commands),
                ..Changes::default()
            },
        }
    }

    /// The journal's tables, opened on first use.
    pub(super) fn event_tables(&mut self) -> Result<&mut EventTables<'t>, StoreError> {
        open_tables(self.txn, &mut self.tables)
    }

    /// Journals `events` as the next events of `session` from `*next_seq` on.
    pub(super) fn write_events(
        &mut self,
        session: Uuid,
        next_seq: &mut u64,
        events: Vec<NewEvent>,
    ) -> Result<(), StoreError> {
        let Batch {
            txn,
            tables,
            created_at,
            changes,
        } = self;
        let published = &mut changes.published;
        let tables = open_tables(txn, tables)?;
        published.reserve(events.len());
        for event in events {
            let seq = *next_seq;
            let id = Uuid::now_v7();
            let (record, json) = encode_record(id, seq, session, &event, created_at);
            (tables.events)
                .insert((session.as_u128(), seq), record.as_slice())
                .map_err(storage)?;
            (tables.ids)
                .insert(id.as_u128(), (session.as_u128(), seq))
                .map_err(storage)?;
            *next_seq += 1;
            published.push((session, StoredEvent { id, seq, json }));
        }
        Ok(())
    }

    /// Queues the reply of one command until the batch commits (or fails).
    pub(super) fn answer<T: Send + 'static>(
        &mut self,
        reply: Reply<T>,
        result: Result<T, StoreError>,
    ) {
        if let Err(err @ (StoreError::Storage(_) | StoreError::Corrupt(_))) = &result {
            // The transaction may hold part of this command: fail the whole batch.
            self.changes.failed = Some(err.clone());
        }
        self.changes.replies.push(Box::new(move |failure| {
            let result = match (failure, result) {
                (Some(err), Ok(_)) => Err(err.clone()),
                (_, result) => result,
            };
            // The caller may have gone away (client disconnected); that is fine.
            let _ = reply.send(result);
        }));
    }

    /// Closes the tables and hands back what the commit needs.
    pub(super) fn finish(self) -> Changes {
        self.changes
    }
}

fn open_tables<'a, 't>(
    txn: &'t WriteTransaction,
    slot: &'a mut Option<EventTables<'t>>,
) -> Result<&'a mut EventTables<'t>, StoreError> {
    if slot.is_none() {
        *slot = Some(EventTables {
            events: txn.open_table(tables::EVENTS).map_err(storage)?,
            ids: txn.open_table(tables::EVENT_IDS).map_err(storage)?,
        });
    }
    slot.as_mut()
        .ok_or_else(|| StoreError::Storage("the journal tables are not open".into()))
}
