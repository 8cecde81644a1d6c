//! A running turn's state as the host imports see it (`TurnCtx`): its
//! open messages and tool calls, its limits and failure, and the way its
//! events reach the journal (the outbox, `flush`, the closing events).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;
use uuid::Uuid;

use super::bindings::HostError;
use super::gates::Gates;
use super::limits::TurnLimits;
use super::outbound::Outbound;
use super::redact::Redactor;
use crate::journal::payloads::{self, Role};
use crate::journal::{NewEvent, TurnErrorKind};
use crate::store::Outbox;
use crate::store::{Store, StoreError, ToolCallRecord, TurnReason, TurnTicket, WriterHandle};

/// Why a turn must end with TURN_ERROR although the guest returned normally.
#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: TurnErrorKind,
    pub message: String,
}

/// A gated call that suspended the turn.
#[derive(Debug, Clone)]
pub struct Suspension {
    pub call: ToolCallRecord,
    pub reason: Option<String>,
    pub gated_by: Vec<&'static str>,
    /// Every call of the step, in order.
    pub step: Vec<ToolCallRecord>,
}

/// The running turn as the host imports see it.
pub struct TurnCtx {
    pub(super) writer: WriterHandle,
    pub(super) store: Store,
    pub session: Uuid,
    pub(super) limits: TurnLimits,
    /// Open messages: id → text so far.
    pub open_messages: Vec<(String, String)>,
    /// Tool calls of this turn still waiting for their result: id → name.
    pub pending_calls: HashMap<String, String>,
    /// `end-session` was called.
    pub ended: bool,
    /// The gated call this turn suspended on; every effect is refused after it.
    pub suspension: Option<Suspension>,
    /// In a resumed turn: the pending call a human denied (its only valid result is `denied`).
    pub(super) denied_call: Option<String>,
    /// Every tool call id this turn has seen (proposed or resumed).
    pub(super) seen_calls: HashSet<String>,
    pub(super) gates: Arc<Gates>,
    /// Replaces the turn's secret values in what the guest emits.
    pub redactor: Redactor,
    /// The first broken rule or limit; the turn ends with TURN_ERROR.
    pub failure: Option<Failure>,
    pub(super) events: u64,
    /// Where the turn's events wait for the writer (shared with `outbound`).
    pub outbox: Arc<Outbox>,
    /// The turn's outbound HTTP (its records go through `outbox` as they happen).
    pub outbound: Option<Arc<Outbound>>,
}

impl TurnCtx {
    pub fn new(
        writer: WriterHandle,
        store: Store,
        ticket: &TurnTicket,
        limits: TurnLimits,
        gates: Arc<Gates>,
        redactor: Redactor,
    ) -> Self {
        let mut pending_calls = HashMap::new();
        let mut denied_call = None;
        if let TurnReason::ApprovalDecision {
            approved, pending, ..
        } = &ticket.reason
        {
            // The resumed turn answers the suspended step: each call once.
            for call in &pending.step {
                pending_calls.insert(call.tool_call_id.clone(), call.name.clone());
            }
            if !approved {
                denied_call = Some(pending.call.tool_call_id.clone());
            }
        }
        TurnCtx {
            writer,
            store,
            session: ticket.session_id,
            limits,
            open_messages: Vec::new(),
            seen_calls: pending_calls.keys().cloned().collect(),
            pending_calls,
            ended: false,
            suspension: None,
            denied_call,
            gates,
            redactor,
            failure: None,
            events: 0,
            outbox: Arc::new(Outbox::new(ticket.session_id, ticket.turn)),
            outbound: None,
        }
    }

    /// Refuses further effects once the turn has failed or the session ended.
    pub(super) fn check_open(&self) -> Result<(), HostError> {
        if let Some(suspension) = &self.suspension {
            return Err(HostError::Closed(format!(
                "the turn is suspended until a human decides on tool call `{}`: return from handle",
                suspension.call.tool_call_id
            )));
        }
        if let Some(failure) = &self.failure {
            return Err(HostError::Closed(format!(
                "the turn has failed: {}",
                failure.message
            )));
        }
        if self.ended {
            return Err(HostError::Closed(
                "the session has ended: nothing more can be written".into(),
            ));
        }
        Ok(())
    }

    /// Records a broken rule: the effect is refused and the turn will fail.
    pub(super) fn fail(&mut self, kind: TurnErrorKind, message: String) -> HostError {
        self.stop_outbound();
        if self.failure.is_none() {
            self.failure = Some(Failure {
                kind,
                message: message.clone(),
            });
        }
        match kind {
            TurnErrorKind::Limit => HostError::Limit(message),
            _ => HostError::InvalidOrder(message),
        }
    }

    /// Once the turn is suspended, failed or ended, its guest may not send
    /// requests either: every effect is refused.
    pub(super) fn stop_outbound(&self) {
        if let Some(outbound) = &self.outbound {
            outbound.stop();
        }
    }

    /// The turn's last outbound records (see `Outbound::close`).
    pub fn close_outbound(&self) -> Vec<NewEvent> {
        self.outbound
            .as_ref()
            .map(|o| o.close())
            .unwrap_or_default()
    }

    /// Queues events to the journal, after the records of outbound requests
    /// that ended meanwhile (the host's, so they do not count against `max_events`).
    pub(super) async fn emit(&mut self, mut events: Vec<NewEvent>) -> Result<(), HostError> {
        self.events += events.len() as u64;
        if self.events > self.limits.max_events {
            let max = self.limits.max_events;
            return Err(self.fail(
                TurnErrorKind::Limit,
                format!("more than {max} events in one turn"),
            ));
        }
        if let Some(outbound) = &self.outbound {
            let mut records = outbound.take_finished();
            if !records.is_empty() {
                records.append(&mut events);
                events = records;
            }
        }
        match self.writer.append(&self.outbox, events).await {
            Ok(_) => Ok(()),
            Err(err) => Err(self.storage_failed(err)),
        }
    }

    pub(super) fn storage_failed(&mut self, err: StoreError) -> HostError {
        self.stop_outbound();
        self.failure.get_or_insert(Failure {
            kind: TurnErrorKind::Storage,
            message: "the host could not record the turn's events".into(),
        });
        HostError::Unavailable(err.to_string())
    }

    /// MESSAGE_END for every message still open (their full text redacted
    /// again, since a secret may be split across deltas).
    pub fn close_open_messages(&mut self, incomplete: bool) -> Vec<NewEvent> {
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
    pub async fn flush(&mut self) -> Result<(), StoreError> {
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
