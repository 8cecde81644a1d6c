//! The host side of `agenthost:agent/host`: every effect a turn has, checked and journaled.
//!
//! A turn's events are queued to the writer without waiting for each commit
//! (they stream as their batch commits) until more than `OUTBOX_BYTES` wait
//! for the journal: then the call returns once they are committed. The
//! turn's final commit, made by `runtime::turn`, waits. Every event counts
//! against the turn's `max_events` and `max_output_mb`, and a turn has at
//! most `max_open_messages` open (`output_limit`). The order rules live here: no delta outside its
//! message, no result without its call, nothing after the session ended.
//! A broken rule refuses the effect and fails the turn. Every effect first
//! asks the turn's gate (`TurnCtx::open`): a suspended, failed, ended or
//! cancelled turn has none.
//!
//! Gated tool calls: `tool-calls` journals every call of a step, then asks the
//! deployment's `Gates`. One gated call suspends the turn: from then on every
//! effect is refused, and the turn's final commit journals
//! TOOL_APPROVAL_REQUIRED. More than one fails the turn. A resumed turn may
//! answer exactly the calls of the suspended step, once each, and a denied
//! call only as `denied`.

use serde::Deserialize;
use uuid::Uuid;

use super::ctx::TurnCtx;
use super::gate::Suspension;
use crate::journal::payloads::{self, Delta, Role};
use crate::journal::{NewEvent, TurnErrorKind};
use crate::runtime::InstanceData;
use crate::runtime::bindings::{
    self, Event, HistoryPage, Host, HostError, Step, ToolCall, ToolStatus,
};
use crate::store::ToolCallRecord;

fn ctx(state: &mut InstanceData) -> wasmtime::Result<&mut TurnCtx> {
    state
        .turn
        .as_mut()
        .ok_or_else(|| wasmtime::format_err!("host effects are not available while describing"))
}

/// A journal event as `read-history` hands it out.
#[derive(Deserialize)]
struct EnvelopeIn<'a> {
    #[serde(rename = "type")]
    event_type: String,
    #[serde(borrow)]
    payload: &'a serde_json::value::RawValue,
}

impl bindings::agenthost::agent::types::Host for InstanceData {}

/// Each import is the turn's method of the same name, below.
impl Host for InstanceData {
    async fn message_start(&mut self) -> wasmtime::Result<Result<String, HostError>> {
        Ok(ctx(self)?.message_start().await)
    }

    async fn message_delta(
        &mut self,
        message_id: String,
        text: String,
    ) -> wasmtime::Result<Result<(), HostError>> {
        Ok(ctx(self)?.message_delta(message_id, text).await)
    }

    async fn message_end(&mut self, message_id: String) -> wasmtime::Result<Result<(), HostError>> {
        Ok(ctx(self)?.message_end(message_id).await)
    }

    async fn tool_calls(
        &mut self,
        calls: Vec<ToolCall>,
        reason: Option<String>,
    ) -> wasmtime::Result<Result<Step, HostError>> {
        Ok(ctx(self)?.tool_calls(calls, reason).await)
    }

    async fn tool_result(
        &mut self,
        tool_call_id: String,
        output: String,
        status: ToolStatus,
    ) -> wasmtime::Result<Result<(), HostError>> {
        Ok(ctx(self)?.tool_result(tool_call_id, output, status).await)
    }

    async fn read_history(
        &mut self,
        after: Option<u64>,
        limit: u32,
    ) -> wasmtime::Result<Result<HistoryPage, HostError>> {
        ctx(self)?.read_history(after, limit).await
    }

    async fn end_session(&mut self) -> wasmtime::Result<Result<(), HostError>> {
        Ok(ctx(self)?.end_session())
    }

    async fn schedule(
        &mut self,
        after_ms: Option<u64>,
        at: Option<String>,
        input: String,
    ) -> wasmtime::Result<Result<String, HostError>> {
        Ok(ctx(self)?.schedule(after_ms, at, input).await)
    }

    async fn cancel_schedule(&mut self, id: String) -> wasmtime::Result<Result<bool, HostError>> {
        Ok(ctx(self)?.cancel_schedule(id).await)
    }

    async fn mcp_tools(
        &mut self,
    ) -> wasmtime::Result<Result<Vec<bindings::agenthost::agent::types::ToolSpec>, HostError>> {
        Ok(ctx(self)?.mcp_tools().await)
    }

    async fn mcp_call(
        &mut self,
        tool_call_id: String,
    ) -> wasmtime::Result<Result<bindings::agenthost::agent::host::McpResult, HostError>> {
        Ok(ctx(self)?.mcp_call(tool_call_id).await)
    }

    async fn report_panic(&mut self, message: String) -> wasmtime::Result<()> {
        let mut message = message;
        crate::util::truncate_utf8(&mut message, 4096);
        self.panic = Some(message);
        Ok(())
    }
}

impl TurnCtx {
    pub(super) async fn message_start(&mut self) -> Result<String, HostError> {
        let mut turn = self.open()?;
        let max = turn.limits.max_open_messages;
        if turn.calls.open_message_count() >= max {
            let message =
                format!("more than {max} messages open at once (limits.max_open_messages)");
            return Err(turn.fail(TurnErrorKind::OutputLimit, message));
        }
        let id = format!("msg_{}", Uuid::now_v7().simple());
        let event = NewEvent::of(&payloads::MessageStart {
            message_id: id.clone(),
            role: Role::Assistant,
        });
        // Open only once admitted: a refused start leaves nothing to close.
        turn.admit(std::slice::from_ref(&event))?;
        turn.calls.open_message(id.clone());
        turn.send(vec![event]).await.map(|()| id)
    }

    pub(super) async fn message_delta(
        &mut self,
        message_id: String,
        text: String,
    ) -> Result<(), HostError> {
        let mut turn = self.open()?;
        super::control::injected_panic(&text);
        let text = turn.redactor.redact(&text).into_owned();
        let max = turn.limits.max_message_bytes;
        let Some(index) = turn.calls.message(&message_id) else {
            let message = format!("MESSAGE_DELTA for message `{message_id}`, which is not open");
            return Err(turn.fail(TurnErrorKind::InvalidOrder, message));
        };
        if turn.calls.message_len(index) + text.len() > max {
            let message = format!("message `{message_id}` is longer than {max} bytes");
            return Err(turn.fail(TurnErrorKind::Limit, message));
        }
        let delta = payloads::MessageDelta {
            message_id,
            delta: Delta::Text { text },
        };
        let event = NewEvent::of(&delta);
        // The text joins its message only once admitted, so a message's
        // MESSAGE_END holds exactly its journaled deltas.
        turn.admit(std::slice::from_ref(&event))?;
        let Delta::Text { text } = &delta.delta;
        turn.calls.append_text(index, text);
        turn.send(vec![event]).await
    }

    pub(super) async fn message_end(&mut self, message_id: String) -> Result<(), HostError> {
        let mut turn = self.open()?;
        let Some(index) = turn.calls.message(&message_id) else {
            let message = format!("MESSAGE_END for message `{message_id}`, which is not open");
            return Err(turn.fail(TurnErrorKind::InvalidOrder, message));
        };
        let (id, text) = turn.calls.close_message(index);
        // A secret split across deltas is whole here: redact the full text too.
        let text = turn.redactor.redact(&text).into_owned();
        let event = NewEvent::of(&payloads::MessageEnd {
            message_id: id,
            role: Role::Assistant,
            text,
            incomplete: None,
        });
        turn.emit(vec![event]).await
    }

    async fn tool_calls(
        &mut self,
        calls: Vec<ToolCall>,
        reason: Option<String>,
    ) -> Result<Step, HostError> {
        // A closed gate refuses before the journal is read for earlier ids.
        self.open()?;
        self.remember_earlier_calls().await?;
        // MCP tools are gated by their server's rule, which may need its list.
        let mcp_gated = self.mcp_gated(&calls).await;
        let mut turn = self.open()?;
        // What a gated call carries is stored in the session's record, where
        // PostgreSQL cannot hold a NUL: refused on every engine alike.
        let holds_nul = |text: &str| text.contains('\0');
        if reason.as_deref().is_some_and(holds_nul)
            || calls
                .iter()
                .any(|c| holds_nul(&c.tool_call_id) || crate::util::json_has_nul(&c.arguments))
        {
            let message = "a tool call or its reason holds a NUL character (U+0000)";
            return Err(turn.fail(TurnErrorKind::InvalidOrder, message.to_string()));
        }
        let reason = match reason {
            Some(reason) => {
                turn.check_text("the step's reason", &reason)?;
                Some(turn.redactor.redact(&reason).into_owned())
            }
            None => None,
        };
        let mut step = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            let id = &call.tool_call_id;
            if id.is_empty() || id.len() > 128 {
                let message = format!("tool call #{i} has an empty or over-long id");
                return Err(turn.fail(TurnErrorKind::InvalidOrder, message));
            }
            // An id is journaled as it is (the guest answers by it): one
            // holding a secret's value is refused, not shown.
            if turn.redactor.redact(id) != id.as_str()
                || turn.redactor.redact(&call.name) != call.name
            {
                let message = format!(
                    "tool call #{i}'s id or tool name holds the value of a secret; it was not journaled"
                );
                return Err(turn.fail(TurnErrorKind::InvalidOrder, message));
            }
            if turn.calls.is_seen(id) || calls[..i].iter().any(|c| c.tool_call_id == *id) {
                let message = format!("tool call id `{id}` is used twice in this session");
                return Err(turn.fail(TurnErrorKind::InvalidOrder, message));
            }
            if !crate::runtime::valid_tool_name(&call.name) {
                let message = format!(
                    "tool call `{id}` names no valid tool (1 to 64 letters, digits, _ or -)"
                );
                return Err(turn.fail(TurnErrorKind::InvalidOrder, message));
            }
            let arguments = turn.parse_json("tool call arguments", &call.arguments)?;
            step.push(ToolCallRecord {
                tool_call_id: id.clone(),
                name: call.name.clone(),
                arguments,
            });
        }
        let events = (step.iter())
            .map(|c| {
                NewEvent::of(&payloads::ToolCall {
                    tool_call_id: c.tool_call_id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                    mcp_server: turn.mcp_server_of(&c.name),
                })
            })
            .collect();
        turn.calls.see(&step);
        turn.emit(events).await?;
        let gates = turn.gates.clone();
        let gated_by = |name: &str| {
            let mut by = gates.gated_by(name).to_vec();
            if mcp_gated.contains(name) && !by.contains(&"manifest") {
                // In the documented order: code, manifest, policy.
                let at = by.iter().position(|m| *m == "policy").unwrap_or(by.len());
                by.insert(at, "manifest");
            }
            by
        };
        let gated: Vec<&ToolCallRecord> = (step.iter())
            .filter(|c| !gated_by(&c.name).is_empty())
            .collect();
        match gated.as_slice() {
            [] => {
                turn.calls.wait_for(&step);
                Ok(Step::Run)
            }
            [call] => {
                let call = (*call).clone();
                let wire = ToolCall {
                    tool_call_id: call.tool_call_id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.to_string(),
                };
                turn.gate.suspend(Suspension {
                    gated_by: gated_by(&call.name),
                    call,
                    reason,
                    step,
                });
                Ok(Step::Suspend(wire))
            }
            several => {
                let names: Vec<String> = (several.iter())
                    .map(|c| format!("`{}` ({})", c.tool_call_id, c.name))
                    .collect();
                let message = format!(
                    "one step proposed {} gated tool calls: {}; one decision per resume: propose each gated call in its own step",
                    several.len(),
                    names.join(", ")
                );
                Err(turn.fail(TurnErrorKind::MultipleGatedCalls, message))
            }
        }
    }

    pub(super) async fn tool_result(
        &mut self,
        tool_call_id: String,
        output: String,
        status: ToolStatus,
    ) -> Result<(), HostError> {
        let mut turn = self.open()?;
        let Some(name) = turn.calls.pending(&tool_call_id).cloned() else {
            let message =
                format!("TOOL_RESULT for tool call `{tool_call_id}`, which is not waiting for one");
            return Err(turn.fail(TurnErrorKind::InvalidOrder, message));
        };
        let answered = turn.calls.given_result(&tool_call_id).cloned();
        let denied = turn.calls.is_denied(&tool_call_id);
        if answered.is_none() && denied != matches!(status, ToolStatus::Denied) {
            let message = if denied {
                format!(
                    "tool call `{tool_call_id}` was denied by a human: its result must be `denied`"
                )
            } else {
                format!(
                    "tool call `{tool_call_id}` was not denied: only a denied call has a `denied` result"
                )
            };
            return Err(turn.fail(TurnErrorKind::InvalidOrder, message));
        }
        let output = turn.parse_json("tool output", &output)?;
        if let Some(given) = answered {
            let kept = match status {
                ToolStatus::Ok => output == given,
                ToolStatus::Denied => true,
                ToolStatus::Error => false,
            };
            if !kept {
                let message = format!(
                    "a human gave the result of tool call `{tool_call_id}`: report it `ok` with exactly that output"
                );
                return Err(turn.fail(TurnErrorKind::InvalidOrder, message));
            }
        }
        turn.calls.answer(&tool_call_id);
        let status = match status {
            ToolStatus::Ok => payloads::ToolStatus::Ok,
            ToolStatus::Error => payloads::ToolStatus::Error,
            ToolStatus::Denied => payloads::ToolStatus::Denied,
        };
        let event = NewEvent::of(&payloads::ToolResult {
            tool_call_id,
            name,
            status,
            output,
        });
        turn.emit(vec![event]).await
    }

    /// Not an effect: a failed or ended turn may still read; a suspended one may not.
    async fn read_history(
        &mut self,
        after: Option<u64>,
        limit: u32,
    ) -> wasmtime::Result<Result<HistoryPage, HostError>> {
        if let Err(refused) = self.gate.check_read() {
            return Ok(Err(refused));
        }
        // The agent reads its own turn's effects too: wait for their commit.
        if let Err(err) = self.flush().await {
            return Ok(Err(self.storage_failed(err)));
        }
        let limit = (limit as usize).clamp(1, self.limits.max_history_page);
        let from = after.map_or(0, |seq| seq.saturating_add(1));
        let session = self.journal.session;
        let events = match (self.journal)
            .store
            .read(move |s| s.events(session, from, limit))
            .await
        {
            Ok(events) => events,
            Err(err) => return Ok(Err(HostError::Unavailable(err.to_string()))),
        };
        let next = (events.len() == limit)
            .then(|| events.last().map(|e| e.seq))
            .flatten();
        let mut page = Vec::with_capacity(events.len());
        for event in &events {
            let envelope: EnvelopeIn = serde_json::from_str(&event.json)?;
            page.push(Event {
                seq: event.seq,
                event_type: envelope.event_type,
                payload: envelope.payload.get().to_string(),
            });
        }
        Ok(Ok(HistoryPage { events: page, next }))
    }

    fn end_session(&mut self) -> Result<(), HostError> {
        self.open()?;
        self.gate.end_session();
        Ok(())
    }
}
