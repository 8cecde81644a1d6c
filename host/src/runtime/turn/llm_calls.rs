//! The `llm` interface's imports (`aliases`, `complete`) as the turn's
//! methods: a completion of a declared alias, each request journaled
//! (LLM_CALL committed before it leaves, LLM_RESULT after), its text
//! streamed by the host straight into one assistant message
//! (MESSAGE_START / MESSAGE_DELTA / MESSAGE_END), its tool calls handed
//! back to the guest; the next alias of the chain tried only while no
//! token was journaled (docs/llm.md).

use http_body_util::BodyExt;
use serde_json::{Map, Value};
use wasmtime_wasi_http::WasiBody;

use super::ctx::TurnCtx;
use super::gate::BudgetStop;
use super::llm::settings::{LlmSettings, Provider};
use super::llm::wire::{self, Assembly, SseSplitter};
use crate::journal::NewEvent;
use crate::journal::payloads::{LlmCall, LlmResult, LlmUsage};
use crate::runtime::InstanceData;
use crate::runtime::bindings::HostError;
use crate::runtime::bindings::agenthost::agent::llm::{
    Completion, CompletionRequest, Host, LlmError, ModelToolCall,
};
use crate::store::Reserved;
use crate::store::Spend;

fn ctx(state: &mut InstanceData) -> wasmtime::Result<&mut TurnCtx> {
    state
        .turn
        .as_mut()
        .ok_or_else(|| wasmtime::format_err!("host effects are not available while describing"))
}

impl Host for InstanceData {
    async fn aliases(&mut self) -> wasmtime::Result<Vec<String>> {
        Ok(ctx(self)?.llm.aliases())
    }

    async fn complete(
        &mut self,
        request: CompletionRequest,
    ) -> wasmtime::Result<Result<Completion, LlmError>> {
        Ok(ctx(self)?.llm_complete(request).await)
    }
}

/// A completion request's messages, tools and parameters, parsed.
type Asked = (Vec<Value>, Vec<Value>, Map<String, Value>);

/// How a streamed answer ended short.
enum Short {
    /// The provider failed; `token` says whether a token was taken already.
    Failed { why: String, token: bool },
    /// The host refused an effect (a limit, a closed gate, storage).
    Host(HostError),
}

impl TurnCtx {
    /// `complete`: the request to `alias`, then to its fallbacks in order
    /// while each fails before its first token.
    pub(super) async fn llm_complete(
        &mut self,
        request: CompletionRequest,
    ) -> Result<Completion, LlmError> {
        self.open().map_err(LlmError::Host)?;
        let Some(chain) = self.llm.chain(&request.alias) else {
            let declared = self.llm.aliases().join(", ");
            return Err(LlmError::UnknownAlias(format!(
                "no `[llm.{}]` is declared (declared: {declared})",
                request.alias
            )));
        };
        let (messages, tools, parameters) = self.llm_request(&request)?;
        let requests = self.outbound.host_requests();
        let mut errors = Vec::new();
        for alias in chain {
            let Some(settings) = self.llm.settings(&alias).cloned() else {
                continue;
            };
            let body = wire::request_body(&settings, &messages, &tools, &parameters);
            let call_id = self.llm.next_call_id(self.journal.turn);
            let call = LlmCall {
                call_id: call_id.clone(),
                alias: alias.clone(),
                provider: settings.provider.as_str().into(),
                model: settings.model.clone(),
            };
            self.llm_reserve(call, worst_case(&settings, &body)).await?;
            let short = match self.llm.send(&alias, &body, &requests).await {
                Ok(response) => {
                    match self
                        .llm_stream(&settings, response.into_body(), &call_id, &alias)
                        .await
                    {
                        Ok(completion) => return Ok(completion),
                        Err(short) => short,
                    }
                }
                Err(failed) => Short::Failed {
                    why: failed.why,
                    token: !failed.may_fail_over,
                },
            };
            match short {
                Short::Host(err) => return Err(LlmError::Host(err)),
                Short::Failed { why, token } => {
                    let why = self.redactor.redact(&why).into_owned();
                    self.llm_result(
                        &call_id,
                        LlmUsage::default(),
                        "error",
                        None,
                        None,
                        Some(why.clone()),
                    )
                    .await?;
                    errors.push(why);
                    if token {
                        break;
                    }
                }
            }
        }
        Err(LlmError::Failed(errors.join("; ")))
    }

    /// Journals `call` with the reservation of its worst case (the writer
    /// checks the session's LLM budget in the same transaction), or pauses
    /// the turn at the budget: nothing is sent, and `complete` answers
    /// `host(closed)`, as every later effect of the turn.
    async fn llm_reserve(&mut self, call: LlmCall, worst: Spend) -> Result<(), LlmError> {
        let event = [NewEvent::of(&call)];
        let mut open = self.open().map_err(LlmError::Host)?;
        // Counted against the turn's event and output limits like any event.
        open.admit(&event).map_err(LlmError::Host)?;
        // Earlier outbound records first, so the LLM_CALL keeps its place.
        open.send(Vec::new()).await.map_err(LlmError::Host)?;
        let manifest = self.llm.budget();
        let outbox = self.outbox();
        let reserved = (self.journal.writer)
            .reserve_llm(&outbox, call, worst, manifest)
            .await;
        match reserved {
            Ok(Reserved::Held) => Ok(()),
            Ok(Reserved::Refused(reached)) => {
                self.llm.count_budget_reached(&reached.scope);
                self.gate.pause_budget(BudgetStop {
                    reached,
                    needed: worst,
                    manifest,
                });
                Err(LlmError::Host(self.gate.check().err().unwrap_or_else(
                    || HostError::Closed("the session's LLM budget is reached".into()),
                )))
            }
            Err(err) => Err(LlmError::Host(self.storage_failed(err))),
        }
    }

    /// The guest's messages, tools and parameters, checked.
    fn llm_request(&mut self, request: &CompletionRequest) -> Result<Asked, LlmError> {
        let max = self.limits.max_payload_bytes.max(1 << 20);
        let parse = |what: &str, text: &str| -> Result<Value, LlmError> {
            if text.len() > max {
                return Err(LlmError::InvalidRequest(format!(
                    "{what} is larger than {max} bytes"
                )));
            }
            if text.trim().is_empty() {
                return Ok(Value::Null);
            }
            serde_json::from_str(text)
                .map_err(|e| LlmError::InvalidRequest(format!("{what} is not valid JSON: {e}")))
        };
        let messages = match parse("messages", &request.messages)? {
            Value::Array(messages) if !messages.is_empty() => messages,
            _ => {
                return Err(LlmError::InvalidRequest(
                    "messages must be a JSON array of at least one message".into(),
                ));
            }
        };
        let tools = match parse("tools", &request.tools)? {
            Value::Array(tools) => tools,
            Value::Null => Vec::new(),
            _ => {
                return Err(LlmError::InvalidRequest(
                    "tools must be a JSON array".into(),
                ));
            }
        };
        let parameters = match parse("parameters", &request.parameters)? {
            Value::Object(parameters) => parameters,
            Value::Null => Map::new(),
            _ => {
                return Err(LlmError::InvalidRequest(
                    "parameters must be a JSON object".into(),
                ));
            }
        };
        Ok((messages, tools, parameters))
    }

    /// Reads one streamed answer: its text into one assistant message (opened
    /// at its first text), its tool calls and usage assembled; LLM_RESULT
    /// once it ended whole.
    async fn llm_stream(
        &mut self,
        settings: &LlmSettings,
        mut body: WasiBody,
        call_id: &str,
        alias: &str,
    ) -> Result<Completion, Short> {
        let provider: Provider = settings.provider;
        let mut sse = SseSplitter::default();
        let mut assembly = Assembly::default();
        let mut message: Option<String> = None;
        let mut text = String::new();
        let mut token = false;
        let failed = |why: String, token: bool| Short::Failed { why, token };
        while !assembly.done {
            let frame = match body.frame().await {
                None => break,
                Some(Err(err)) => {
                    return Err(failed(
                        format!("model `{alias}`'s stream broke: {err}"),
                        token,
                    ));
                }
                Some(Ok(frame)) => frame,
            };
            let Some(data) = frame.data_ref() else {
                continue;
            };
            let events = sse
                .push(data)
                .map_err(|why| failed(format!("model `{alias}`: {why}"), token))?;
            for (event, data) in events {
                let said = assembly
                    .feed(provider, &event, &data)
                    .map_err(|why| failed(format!("model `{alias}`: {why}"), token))?;
                token |= said.token;
                if said.text.is_empty() {
                    continue;
                }
                if message.is_none() {
                    message = Some(self.message_start().await.map_err(Short::Host)?);
                }
                let id = message.clone().unwrap_or_default();
                self.message_delta(id, said.text.clone())
                    .await
                    .map_err(Short::Host)?;
                text.push_str(&said.text);
            }
        }
        if !assembly.complete(provider) {
            return Err(failed(
                format!("model `{alias}`'s stream ended before its answer did"),
                token,
            ));
        }
        if let Some(id) = &message {
            self.message_end(id.clone()).await.map_err(Short::Host)?;
        }
        let usage = LlmUsage {
            input_tokens: assembly.input_tokens,
            output_tokens: assembly.output_tokens,
        };
        let cost = settings.price.map(|price| {
            (usage.input_tokens as f64 * price.input_per_mtok
                + usage.output_tokens as f64 * price.output_per_mtok)
                / 1_000_000.0
        });
        self.llm
            .count_tokens(alias, usage.input_tokens, usage.output_tokens);
        let finish_reason = assembly
            .finish_reason
            .clone()
            .unwrap_or_else(|| "stop".into());
        self.llm_result(
            call_id,
            usage,
            &finish_reason,
            cost,
            Some(alias.to_string()),
            None,
        )
        .await
        .map_err(|e| match e {
            LlmError::Host(err) => Short::Host(err),
            other => failed(format!("{other:?}"), true),
        })?;
        Ok(Completion {
            message_id: message,
            text,
            tool_calls: (assembly.calls.into_iter())
                .map(|c| ModelToolCall {
                    id: c.id,
                    name: c.name,
                    arguments: c.arguments,
                })
                .collect(),
            finish_reason,
            served_by: alias.to_string(),
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
        })
    }

    async fn llm_result(
        &mut self,
        call_id: &str,
        usage: LlmUsage,
        finish_reason: &str,
        cost: Option<f64>,
        served_by: Option<String>,
        error: Option<String>,
    ) -> Result<(), LlmError> {
        let event = NewEvent::of(&LlmResult {
            call_id: call_id.to_string(),
            usage,
            finish_reason: finish_reason.to_string(),
            cost,
            served_by,
            error,
        });
        let mut turn = self.open().map_err(LlmError::Host)?;
        turn.emit(vec![event]).await.map_err(LlmError::Host)
    }
}

/// A request's worst case, reserved against the LLM budget before it is
/// sent: its input estimated as the request body's bytes / 4 (rounded up;
/// more than any tokenizer counts for JSON text), plus the output cap it
/// sends (`max_tokens`); in money through the alias's `price`.
pub(super) fn worst_case(settings: &LlmSettings, body: &Value) -> Spend {
    let input = (body.to_string().len() as u64).div_ceil(4);
    let output = body
        .get("max_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(u64::from(settings.max_output_tokens()));
    let cost = settings.price.map_or(0.0, |price| {
        (input as f64 * price.input_per_mtok + output as f64 * price.output_per_mtok) / 1_000_000.0
    });
    Spend {
        tokens: input + output,
        cost,
    }
}
