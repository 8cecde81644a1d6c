//! A running turn's outbox: its events on their way to the writer, coalesced
//! while the writer is busy.
//!
//! A turn's first event after the writer last drained its outbox sends one
//! `Append` command; events the turn emits before the writer reaches that
//! command join it. An idle writer takes each event at once (no added
//! latency); a busy one takes a turn's burst of deltas as one command instead
//! of fifty, so the per-command costs (channel, session checks, reply) stay
//! per burst. Every event of a turn, the host's outbound records included,
//! goes through the turn's one outbox, so they are journaled in the order
//! they were emitted.
//!
//! The outbox counts the bytes (event payloads) that go through it: the
//! runtime checks a turn's output limit against the total, and
//! [`Outbox::throttle`] bounds what a turn may have queued but not committed
//! (its writes wait for the commit: backpressure, not an ever-growing queue).

use std::sync::{Mutex, MutexGuard};

use tokio::sync::oneshot;
use uuid::Uuid;

use super::StoreError;
use super::start::{AppendAck, Committed, append_ack};
use crate::journal::NewEvent;

/// The events of one turn not yet taken by the writer.
pub struct Outbox {
    pub(super) session: Uuid,
    pub(super) turn: u32,
    queued: Mutex<Queued>,
}

#[derive(Default)]
struct Queued {
    events: Vec<NewEvent>,
    /// The ack of the `Append` command on its way to the writer, if one is.
    pending: Option<AppendAck>,
    /// The ack of the latest command: batches commit in order, so once it
    /// resolves everything queued before it is committed.
    last: Option<AppendAck>,
    /// Payload bytes of every event queued through this outbox.
    bytes: u64,
    /// `bytes` when the latest `throttle` wait began: everything up to it is committed.
    committed_bytes: u64,
}

/// The bytes of `events` as the journal stores their payloads.
pub(crate) fn payload_bytes(events: &[NewEvent]) -> u64 {
    events.iter().map(|e| e.payload.get().len() as u64).sum()
}

impl Outbox {
    pub fn new(session: Uuid, turn: u32) -> Self {
        Outbox {
            session,
            turn,
            queued: Mutex::default(),
        }
    }

    /// The outbox of a turn started before the batch that scheduled it
    /// committed (`start.rs`): everything it waits for waits for that too.
    pub fn after(session: Uuid, turn: u32, committed: Option<Committed>) -> Self {
        let outbox = Outbox::new(session, turn);
        outbox.lock().last = committed.map(|c| c.0);
        outbox
    }

    pub fn session(&self) -> Uuid {
        self.session
    }

    pub fn turn(&self) -> u32 {
        self.turn
    }

    /// Payload bytes of every event queued through this outbox so far.
    pub fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    /// Once more than `bound` bytes were queued since the last wait, waits
    /// until everything queued so far is committed: what a turn holds in
    /// memory on its way to the journal stays near `bound`, however fast it
    /// writes. Below the bound it returns at once.
    pub async fn throttle(&self, bound: u64) -> Result<(), StoreError> {
        let (ack, mark) = {
            let queued = self.lock();
            if queued.bytes - queued.committed_bytes <= bound {
                return Ok(());
            }
            (queued.last.clone(), queued.bytes)
        };
        if let Some(ack) = ack {
            ack.await.map_err(|_| StoreError::WriterGone)??;
        }
        let mut queued = self.lock();
        queued.committed_bytes = queued.committed_bytes.max(mark);
        Ok(())
    }

    /// Adds `events` to the command already on its way, if there is one;
    /// hands them back otherwise.
    pub(super) fn join(&self, events: Vec<NewEvent>) -> Result<AppendAck, Vec<NewEvent>> {
        join_pending(&mut self.lock(), events)
    }

    /// Queues `events`. Returns the ack that covers them and, when no
    /// command is on its way yet, the reply of the command to send.
    pub(super) fn push(
        &self,
        events: Vec<NewEvent>,
    ) -> (AppendAck, Option<oneshot::Sender<Result<(), StoreError>>>) {
        let mut queued = self.lock();
        let events = match join_pending(&mut queued, events) {
            Ok(ack) => return (ack, None),
            Err(events) => events,
        };
        if queued.pending.is_some() {
            // The command was dropped before the writer took anything (the
            // writer stopped: `WriterHandle::append` never drops one
            // unsent); its events failed with it.
            queued.events.clear();
        }
        queued.bytes += payload_bytes(&events);
        queued.events.extend(events);
        let (reply, ack) = append_ack();
        queued.pending = Some(ack.clone());
        queued.last = Some(ack.clone());
        (ack, Some(reply))
    }

    /// Resolves once everything queued so far is committed (or failed).
    pub fn last_ack(&self) -> Option<AppendAck> {
        self.lock().last.clone()
    }

    /// The writer takes everything queued; the next event sends a new command.
    pub(super) fn take(&self) -> Vec<NewEvent> {
        let mut queued = self.lock();
        queued.pending = None;
        std::mem::take(&mut queued.events)
    }

    fn lock(&self) -> MutexGuard<'_, Queued> {
        // Nothing panics while holding the lock; a poisoned one holds valid data.
        self.queued
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Adds `events` to the pending command, unless there is none (or it was
/// dropped unanswered).
fn join_pending(queued: &mut Queued, events: Vec<NewEvent>) -> Result<AppendAck, Vec<NewEvent>> {
    match &queued.pending {
        Some(ack) if ack.peek().is_none() => {
            let ack = ack.clone();
            queued.bytes += payload_bytes(&events);
            queued.events.extend(events);
            queued.last = Some(ack.clone());
            Ok(ack)
        }
        _ => Err(events),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::EventType;
    use serde_json::json;

    fn event(n: u64) -> NewEvent {
        NewEvent::untyped(EventType::MessageDelta, json!({ "n": n }))
    }

    #[test]
    fn events_join_the_pending_command_until_the_writer_takes_them() {
        let outbox = Outbox::new(Uuid::now_v7(), 1);
        let (_, first) = outbox.push(vec![event(1)]);
        let (_, second) = outbox.push(vec![event(2), event(3)]);
        assert!(first.is_some(), "the first event sends a command");
        assert!(
            outbox.join(vec![event(9)]).is_ok(),
            "joins the pending command"
        );
        assert!(second.is_none(), "later events join it");
        assert_eq!(outbox.take().len(), 4);
        assert!(
            outbox.join(vec![event(9)]).is_err(),
            "nothing pending any more"
        );
        let (_, third) = outbox.push(vec![event(4)]);
        assert!(third.is_some(), "after the writer took them, a new command");
        assert_eq!(outbox.take().len(), 1);
        assert!(outbox.take().is_empty());
    }

    #[tokio::test]
    async fn throttle_waits_for_the_commit_only_past_its_bound() {
        let outbox = Outbox::new(Uuid::now_v7(), 1);
        let (_, reply) = outbox.push(vec![event(1), event(2)]);
        let Some(reply) = reply else {
            panic!("the first push sends a command")
        };
        let bytes = outbox.bytes();
        assert_eq!(bytes, 2 * event(1).payload.get().len() as u64);
        // Within the bound: at once, although nothing is committed.
        outbox.throttle(bytes).await.unwrap();
        // Past it: only once the command's events are committed.
        let mut waiting = Box::pin(outbox.throttle(bytes - 1));
        assert!(futures::poll!(&mut waiting).is_pending());
        reply.send(Ok(())).ok();
        waiting.await.unwrap();
        // What was committed no longer counts; a failed commit is an error.
        outbox.throttle(0).await.unwrap();
        let (_, reply) = outbox.push(vec![event(3)]);
        drop(reply);
        assert!(outbox.throttle(0).await.is_err());
        assert_eq!(outbox.bytes(), 3 * event(1).payload.get().len() as u64);
    }

    #[tokio::test]
    async fn every_event_of_a_command_shares_its_ack() {
        let outbox = Outbox::new(Uuid::now_v7(), 1);
        let (a, reply) = outbox.push(vec![event(1)]);
        let (b, none) = outbox.push(vec![event(2)]);
        assert!(none.is_none());
        let Some(reply) = reply else {
            panic!("the first push sends a command")
        };
        reply.send(Ok(())).ok();
        assert!(matches!(a.await, Ok(Ok(()))));
        assert!(matches!(b.await, Ok(Ok(()))));
        // A command dropped unanswered (the writer is gone) fails its events,
        // and they are not sent later with someone else's.
        let (c, reply) = outbox.push(vec![event(3)]);
        drop(reply);
        assert!(c.await.is_err());
        let (_, reply) = outbox.push(vec![event(4)]);
        assert!(reply.is_some(), "a new command");
        assert_eq!(outbox.take().len(), 1);
    }
}
