//! A running turn's state as the host imports see it (`TurnCtx`): its
//! open messages and tool calls, its limits, its gate (whether it may still
//! have effects), its outbound access, and the way its events reach the
//! journal (the outbox, `flush`, the closing events).

use std::collections::{HashMap, HashSet};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde_json::Value;
use uuid::Uuid;

use super::bindings::HostError;
use super::gate::{Failure, Gate, Settled};
use super::gates::Gates;
use super::limits::{OUTBOX_BYTES, TurnLimits, journal_exceeded, output_exceeded};
use super::outbound::{Access, OutboundHooks};
use crate::journal::payloads::{self, Role};
use crate::journal::{NewEvent, TurnErrorKind};
use crate::redact::Redactor;
use crate::store::{Committed, Outbox, payload_bytes};
use crate::store::{Db, StoreError, TurnReason, TurnTicket, TurnTimers, WriterHandle};

/// What a turn runs under: the deployment's gates, limits, secrets (as a
/// redactor) and outbound access; nothing at all if it could not be loaded.
pub(super) struct Terms {
    pub gates: Arc<Gates>,
    pub limits: TurnLimits,
    pub redactor: Redactor,
    pub outbound: Access,
    /// The deployment's MCP servers and their credentials.
    pub mcp: super::mcp::McpTerms,
}

/// Events read per query when a turn collects its session's tool call ids.
const CALL_SCAN: usize = 1024;

/// A TOOL_CALL envelope, as far as its id.
#[derive(serde::Deserialize)]
struct CallEnvelope {
    payload: CallId,
}

#[derive(serde::Deserialize)]
struct CallId {
    tool_call_id: String,
}

/// The running turn as the host imports see it.
pub(super) struct TurnCtx {
    pub(super) writer: WriterHandle,
    pub(super) store: Db,
    pub(super) session: Uuid,
    pub(super) limits: TurnLimits,
    /// Whether the turn may still have effects; every effect asks it first.
    pub(super) gate: Arc<Gate>,
    /// Open messages: id → text so far.
    pub(super) open_messages: Vec<(String, String)>,
    /// Tool calls of this turn still waiting for their result: id → name.
    pub(super) pending_calls: HashMap<String, String>,
    /// In a resumed turn: the pending call a human denied (its only valid result is `denied`).
    pub(super) denied_call: Option<String>,
    /// In a resumed turn: the pending call a human answered in place of the
    /// tool, and the result given; its valid results are `ok` with exactly
    /// that output, or `denied` (from an SDK that predates given results).
    pub(super) answered_call: Option<(String, Value)>,
    /// Every tool call id this turn has seen (proposed or resumed), and
    /// once `earlier_calls_read`, those of the session's earlier turns.
    pub(super) seen_calls: HashSet<String>,
    earlier_calls_read: bool,
    /// The turn's number in its session.
    turn: u32,
    pub(super) gates: Arc<Gates>,
    /// Replaces the turn's secret values in what the guest emits.
    pub(super) redactor: Redactor,
    events: u64,
    /// The commit of the batch that scheduled the turn, when the turn
    /// started before it (`store::start`): reads wait for it.
    committed: Option<Committed>,
    /// Where the turn's events wait for the writer (shared with `outbound`).
    outbox: Arc<Outbox>,
    /// The turn's outbound HTTP (its records go through `outbox` as they
    /// happen); the instance's `wasi:http` hooks borrow it.
    pub(super) outbound: OutboundHooks,
    /// The timers the agent set, for the final commit (`timers.rs`).
    pub(super) timers: TurnTimers,
    /// The turn's MCP sessions and tool lists (`runtime::mcp`).
    pub(super) mcp: super::mcp::McpTurn,
    /// The arguments of the calls waiting for their result: id → arguments
    /// (an MCP call is sent with them).
    pub(super) call_arguments: HashMap<String, Value>,
    /// In a resumed turn: the denied call's output, `denied by <approver>[: <message>]`.
    pub(super) denial: Option<String>,
}

impl TurnCtx {
    pub(super) fn new(
        writer: WriterHandle,
        store: Db,
        ticket: &TurnTicket,
        gate: Arc<Gate>,
        terms: Terms,
        committed: Option<Committed>,
    ) -> Self {
        let mut pending_calls = HashMap::new();
        let mut denied_call = None;
        let mut answered_call = None;
        let mut call_arguments = HashMap::new();
        let mut denial = None;
        if let TurnReason::ApprovalDecision {
            approved,
            approver,
            pending,
            details,
        } = &ticket.reason
        {
            if let Some(result) = &details.result {
                answered_call = Some((pending.call.tool_call_id.clone(), result.clone()));
            }
            // The resumed turn answers the suspended step: each call once.
            for call in &pending.step {
                pending_calls.insert(call.tool_call_id.clone(), call.name.clone());
                call_arguments.insert(call.tool_call_id.clone(), call.arguments.clone());
            }
            if !approved {
                denied_call = Some(pending.call.tool_call_id.clone());
                denial = Some(match &details.message {
                    Some(message) => format!("denied by {approver}: {message}"),
                    None => format!("denied by {approver}"),
                });
            }
        }
        let outbox = Arc::new(Outbox::after(
            ticket.session_id,
            ticket.turn,
            committed.clone(),
        ));
        let outbound = OutboundHooks::new(
            terms.outbound,
            writer.clone(),
            outbox.clone(),
            terms.redactor.clone(),
            gate.clone(),
            terms.limits.max_output_bytes.min(terms.limits.journal_room),
        );
        TurnCtx {
            writer,
            store,
            session: ticket.session_id,
            limits: terms.limits,
            gate,
            open_messages: Vec::new(),
            seen_calls: pending_calls.keys().cloned().collect(),
            earlier_calls_read: false,
            turn: ticket.turn,
            pending_calls,
            denied_call,
            answered_call,
            gates: terms.gates,
            redactor: terms.redactor,
            events: 0,
            committed,
            outbox,
            outbound,
            timers: TurnTimers::default(),
            mcp: super::mcp::McpTurn::new(terms.mcp),
            call_arguments,
            denial,
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
        self.outbox.clone()
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
        if self.earlier_calls_read || self.turn <= 1 {
            return Ok(());
        }
        // A turn started before its TURN_STARTED's commit reads after it.
        if let Some(committed) = &self.committed
            && let Err(err) = committed.wait().await
        {
            return Err(self.storage_failed(err));
        }
        let session = self.session;
        let mut from = 0;
        loop {
            let chunk = (self.store)
                .read(move |s| s.events(session, from, CALL_SCAN))
                .await
                .map_err(|err| HostError::Unavailable(err.to_string()))?;
            for event in chunk.iter().filter(|e| e.event_type() == "TOOL_CALL") {
                let envelope: CallEnvelope = serde_json::from_str(&event.json)
                    .map_err(|err| HostError::Unavailable(err.to_string()))?;
                self.seen_calls.insert(envelope.payload.tool_call_id);
            }
            match chunk.last() {
                Some(last) if chunk.len() == CALL_SCAN => from = last.seq + 1,
                _ => break,
            }
        }
        self.earlier_calls_read = true;
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
        let open = std::mem::take(&mut self.open_messages);
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
        match self.outbox.last_ack() {
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
        let count = turn.events + events.len() as u64;
        if count > turn.limits.max_events {
            let max = turn.limits.max_events;
            return Err(turn.fail(
                TurnErrorKind::Limit,
                format!("more than {max} events in one turn"),
            ));
        }
        let max = turn.limits.max_output_bytes;
        let bytes = turn.outbox.bytes() + payload_bytes(events);
        if bytes > max {
            return Err(turn.fail(TurnErrorKind::OutputLimit, output_exceeded(max)));
        }
        if bytes > turn.limits.journal_room {
            let cap = turn.limits.journal_cap.unwrap_or_default();
            return Err(turn.fail(TurnErrorKind::OutputLimit, journal_exceeded(cap)));
        }
        turn.events = count;
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
        if let Err(err) = turn.writer.append(&turn.outbox, events).await {
            return Err(turn.storage_failed(err));
        }
        match turn.outbox.throttle(OUTBOX_BYTES).await {
            Ok(()) => Ok(()),
            Err(err) => Err(turn.storage_failed(err)),
        }
    }
}
