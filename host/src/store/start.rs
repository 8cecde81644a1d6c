//! Turns started before the commit of the command that schedules them:
//! `Starter`, which starts a turn at most once, and `Committed`, what such
//! a turn waits for before it reads.
//!
//! A command that schedules a turn (a session's creation, an input, a
//! decision) journals the turn's TURN_STARTED in its batch. On an engine
//! that commits exactly what it applied, in one attempt (redb), the writer
//! starts the turn as soon as the batch is applied, while the commit's
//! fsync runs: the guest's first steps overlap the commit instead of
//! following it. Nothing becomes visible earlier, because everything a
//! turn does that others can see goes through the writer after that batch:
//! its events, outbound requests (journaled before they leave), its end.
//! What the turn reads (its history, earlier tool calls) waits for
//! `Committed`; if the batch fails, the store stops writes and the turn's
//! first write fails (docs/durability.md, "A turn that starts before its
//! commit").
//!
//! An engine that may apply a batch more than once (PostgreSQL retries a
//! transaction that lost a race) starts nothing early: the caller starts
//! the turn once the command is answered, as before.

use std::sync::{Arc, Mutex};

use super::StoreError;
use super::domain::TurnTicket;
use super::outbox::AppendAck;

/// Resolves once the batch that scheduled a turn is committed (or failed).
#[derive(Clone)]
pub struct Committed(pub(super) AppendAck);

impl Committed {
    /// Waits for the batch's commit.
    pub async fn wait(&self) -> Result<(), StoreError> {
        self.0.clone().await.map_err(|_| StoreError::WriterGone)?
    }
}

type Start = Box<dyn FnOnce(TurnTicket, Option<Committed>) + Send>;

/// Starts one command's turn at most once: early, by the writer, with the
/// batch's `Committed`, or, when that did not happen, by the caller once the
/// command is answered (`None`: it is committed).
pub struct Starter {
    start: Mutex<Option<Start>>,
}

impl Starter {
    pub fn new(start: impl FnOnce(TurnTicket, Option<Committed>) + Send + 'static) -> Arc<Self> {
        Arc::new(Starter {
            start: Mutex::new(Some(Box::new(start))),
        })
    }

    /// Starts `ticket`'s turn unless this starter already started one.
    pub fn start(&self, ticket: TurnTicket, committed: Option<Committed>) {
        let start = self
            .start
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(start) = start {
            start(ticket, committed);
        }
    }
}

/// A command's way to its turn: the starter, and where its output holds the ticket.
pub(super) struct EarlyStart<T> {
    pub starter: Arc<Starter>,
    pub ticket: fn(&T) -> Option<&TurnTicket>,
}
