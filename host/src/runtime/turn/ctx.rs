//! A running turn's state as the host imports see it (`TurnCtx`): its way
//! to the journal (`TurnJournal`: the outbox, `flush`, the closing
//! events), its gate (whether it may still have effects), its call
//! bookkeeping (`calls.rs`), and its capabilities' per-turn states (limits,
//! approval gates, redactor, outbound access, timers, MCP).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde_json::Value;
use uuid::Uuid;
use wasmtime_wasi_http::WasiHttpHooks;

use super::calls::Calls;
use super::gate::{Failure, Gate, Settled};
use super::gates::Gates;
use super::llm::LlmTurn;
use super::mcp::McpTurn;
use super::outbound::{Access, OutboundHooks};
use crate::journal::payloads::{self, Role, ToolCall};
use crate::journal::{NewEvent, TurnErrorKind};
use crate::redact::Redactor;
use crate::runtime::bindings::HostError;
use crate::runtime::compile::AttachedTurn;
use crate::runtime::limits::{OUTBOX_BYTES, TurnLimits, journal_exceeded, output_exceeded};
use crate::store::{Committed, Outbox, payload_bytes};
use crate::store::{Db, StoreError, TurnTicket, TurnTimers, WriterHandle};

/// Events read per query when a turn collects its session's tool call ids.
const CALL_SCAN: usize = 1024;

/// The turn's way to the journal: where its events wait for the writer,
/// and what it reads its session's journal with.
pub(super) struct TurnJournal {
    pub(super) writer: WriterHandle,
    pub(super) store: Db,
    pub(super) session: Uuid,
    /// The turn's number in its session.
    pub(super) turn: u32,
    /// The commit of the batch that scheduled the turn, when the turn
    /// started before it (`store::start`): reads wait for it.
    committed: Option<Committed>,
    /// Where the turn's events wait for the writer (shared with `outbound`).
    outbox: Arc<Outbox>,
    /// Events the turn has emitted (its `max_events`).
    events: u64,
}

/// The running turn as the host imports see it: its way to the journal,
/// its gate, its call bookkeeping, and one state per capability, each made
/// at the turn's start from its deployment's (`deployed.rs`).
pub(crate) struct TurnCtx {
    pub(super) journal: TurnJournal,
    /// Whether the turn may still have effects; every effect asks it first.
    pub(super) gate: Arc<Gate>,
    /// Its open messages and tool calls (`calls.rs`).
    pub(super) calls: Calls,
    pub(super) limits: TurnLimits,
    /// The deployment's approval gates.
    pub(super) gates: Arc<Gates>,
    /// Replaces the turn's secret values in what the guest emits.
    pub(super) redactor: Redactor,
    /// The turn's outbound HTTP (its records go through the outbox as they
    /// happen); the instance's `wasi:http` hooks borrow it.
    pub(super) outbound: OutboundHooks,
    /// The timers the agent set, for the final commit (`timers.rs`).
    pub(super) timers: TurnTimers,
    /// The turn's MCP sessions and tool lists (`mcp/`).
    pub(super) mcp: McpTurn,
    /// The deployment's declared models and their keys (`llm/`).
    pub(super) llm: LlmTurn,
}

/// The capability states a turn starts with (`Deployed::prepare`).
pub(super) struct TurnStates {
    pub gates: Arc<Gates>,
    pub limits: TurnLimits,
    pub redactor: Redactor,
    pub outbound: Access,
    pub mcp: McpTurn,
    pub llm: LlmTurn,
}

impl AttachedTurn for TurnCtx {
    fn http_hooks(&mut self) -> &mut dyn WasiHttpHooks {
        &mut self.outbound
    }
}

impl TurnCtx {
    pub(super) fn new(
        writer: WriterHandle,
        store: Db,
        ticket: &TurnTicket,
        gate: Arc<Gate>,
        states: TurnStates,
        committed: Option<Committed>,
    ) -> Self {
        let outbox = Arc::new(Outbox::after(
            ticket.session_id,
            ticket.turn,
            committed.clone(),
        ));
        let outbound = states.outbound.prepare(
            writer.clone(),
            outbox.clone(),
            states.redactor.clone(),
            gate.clone(),
            states
                .limits
                .max_output_bytes
                .min(states.limits.journal_room),
        );
        TurnCtx {
            journal: TurnJournal {
                writer,
                store,
                session: ticket.session_id,
                turn: ticket.turn,
                committed,
                outbox,
                events: 0,
            },
            gate,
            calls: Calls::at_start(&ticket.reason),
            limits: states.limits,
            gates: states.gates,
            redactor: states.redactor,
            outbound,
            timers: TurnTimers::default(),
            mcp: states.mcp,
            llm: states.llm,
        }
    }

    /// The turn as an effect may use it, if its gate is open: the one way
    /// to emit events. A closed gate refuses the effect, saying why.
    pub(super) fn open(&mut self) -> Result<Open<'_>, HostError> {
        self.gate.check()?;
        Ok(Open(self))
    }

    /// Records a broken rule: the effect is refused and the turn will fail.
    pub(super) fn fail(&mut self, kind: TurnErrorKind, message: String) -> HostError {
        self.gate.fail(Failure {
            kind,
            message: message.clone(),
        });
        match kind {
            TurnErrorKind::Limit | TurnErrorKind::OutputLimit => HostError::Limit(message),
            _ => HostError::InvalidOrder(message),
        }
    }

    /// The guest's call is over: how the gate stands (see `Gate::settle`).
    pub(super) fn settle(&self) -> Settled {
        self.gate.settle()
    }

    /// The turn's outbox (its byte count is the turn's journal bytes).
    pub(super) fn outbox(&self) -> Arc<Outbox> {
        self.journal.outbox.clone()
    }

    /// The turn's last outbound records (see `OutboundHooks::close`).
    pub(super) fn close_outbound(&self) -> Vec<NewEvent> {
        self.outbound.close()
    }

    /// Adds the ids of every tool call the session's journal holds to
    /// `seen_calls`, once per turn (before its first step is checked): a
    /// tool call id is unique within the session (`wit/agent.wit`), since a
    /// tool may take it as its idempotency key. A first turn has none.
    pub(super) async fn remember_earlier_calls(&mut self) -> Result<(), HostError> {
        if self.calls.earlier_read() || self.journal.turn <= 1 {
            return Ok(());
        }
        // A turn started before its TURN_STARTED's commit reads after it.
        if let Some(committed) = &self.journal.committed
            && let Err(err) = committed.wait().await
        {
            return Err(self.storage_failed(err));
        }
        let session = self.journal.session;
        let mut from = 0;
        loop {
            let chunk = (self.journal.store)
                .read(move |s| s.events(session, from, CALL_SCAN))
                .await
                .map_err(|err| HostError::Unavailable(err.to_string()))?;
            for event in chunk.iter() {
                let call = (event.payload::<ToolCall>())
                    .map_err(|err| HostError::Unavailable(err.to_string()))?;
                if let Some(call) = call {
                    self.calls.remember_earlier(call.tool_call_id);
                }
            }
            match chunk.last() {
                Some(last) if chunk.len() == CALL_SCAN => from = last.seq + 1,
                _ => break,
            }
        }
        self.calls.earlier_done();
        Ok(())
    }

    pub(super) fn storage_failed(&mut self, err: StoreError) -> HostError {
        self.gate.fail(Failure {
            kind: TurnErrorKind::Storage,
            message: "the host could not record the turn's events".into(),
        });
        HostError::Unavailable(err.to_string())
    }

    /// MESSAGE_END for every message still open (their full text redacted
    /// again, since a secret may be split across deltas).
    pub(super) fn close_open_messages(&mut self, incomplete: bool) -> Vec<NewEvent> {
        let open = self.calls.take_open_messages();
        (open.into_iter())
            .map(|(id, text)| {
                NewEvent::of(&payloads::MessageEnd {
                    message_id: id,
                    role: Role::Assistant,
                    text: self.redactor.redact(&text).into_owned(),
                    incomplete: Some(incomplete),
                })
            })
            .collect()
    }

    /// Waits until everything queued so far (the guest's events and the
    /// outbound records) is committed.
    pub(super) async fn flush(&mut self) -> Result<(), StoreError> {
        match self.journal.outbox.last_ack() {
            Some(ack) => ack.await.map_err(|_| StoreError::WriterGone)?,
            None => Ok(()),
        }
    }

    pub(super) fn check_text(&mut self, what: &str, text: &str) -> Result<(), HostError> {
        if text.len() > self.limits.max_payload_bytes {
            let max = self.limits.max_payload_bytes;
            return Err(self.fail(
                TurnErrorKind::Limit,
                format!("{what} is larger than {max} bytes"),
            ));
        }
        Ok(())
    }

    pub(super) fn parse_json(&mut self, what: &str, text: &str) -> Result<Value, HostError> {
        self.check_text(what, text)?;
        let value = serde_json::from_str(text).map_err(|e| {
            self.fail(
                TurnErrorKind::InvalidOrder,
                format!("{what} is not valid JSON: {e}"),
            )
        })?;
        Ok(self.redactor.redact_value(value))
    }
}

/// A turn whose gate was open when the effect began (`TurnCtx::open`).
pub(super) struct Open<'a>(&'a mut TurnCtx);

impl Deref for Open<'_> {
    type Target = TurnCtx;

    fn deref(&self) -> &TurnCtx {
        self.0
    }
}

impl DerefMut for Open<'_> {
    fn deref_mut(&mut self) -> &mut TurnCtx {
        self.0
    }
}

impl Open<'_> {
    /// Queues events to the journal (see `admit` and `send`).
    pub(super) async fn emit(&mut self, events: Vec<NewEvent>) -> Result<(), HostError> {
        self.admit(&events)?;
        self.send(events).await
    }

    /// Counts `events` against the turn's limits (its events, its output
    /// bytes), or refuses them and fails the turn: a refused call writes
    /// nothing. Each `admit` is followed by the `send` of the same events.
    pub(super) fn admit(&mut self, events: &[NewEvent]) -> Result<(), HostError> {
        let turn = &mut *self.0;
        let count = turn.journal.events + events.len() as u64;
        if count > turn.limits.max_events {
            let max = turn.limits.max_events;
            return Err(turn.fail(
                TurnErrorKind::Limit,
                format!("more than {max} events in one turn"),
            ));
        }
        let max = turn.limits.max_output_bytes;
        let bytes = turn.journal.outbox.bytes() + payload_bytes(events);
        if bytes > max {
            return Err(turn.fail(TurnErrorKind::OutputLimit, output_exceeded(max)));
        }
        if bytes > turn.limits.journal_room {
            let cap = turn.limits.journal_cap.unwrap_or_default();
            return Err(turn.fail(TurnErrorKind::OutputLimit, journal_exceeded(cap)));
        }
        turn.journal.events = count;
        Ok(())
    }

    /// Queues admitted events, after the records of outbound requests that
    /// ended meanwhile (the host's, so they do not count against
    /// `max_events`); once the turn has more than `OUTBOX_BYTES` on their
    /// way to the journal, waits for their commit.
    pub(super) async fn send(&mut self, mut events: Vec<NewEvent>) -> Result<(), HostError> {
        let turn = &mut *self.0;
        let mut records = turn.outbound.take_finished();
        if !records.is_empty() {
            records.append(&mut events);
            events = records;
        }
        let journal = &turn.journal;
        if let Err(err) = journal.writer.append(&journal.outbox, events).await {
            return Err(turn.storage_failed(err));
        }
        match turn.journal.outbox.throttle(OUTBOX_BYTES).await {
            Ok(()) => Ok(()),
            Err(err) => Err(turn.storage_failed(err)),
        }
    }
}
