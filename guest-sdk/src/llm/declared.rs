//! Declared models: the manifest's `[llm.<alias>]` models, which the host
//! calls with their keys (the agent never sees a key). [`declared_models`]
//! lists the aliases; [`ChatLoop`](super::ChatLoop) uses one when any is
//! declared. The host streams the model's text straight into the turn's
//! assistant message and journals each request (`LLM_CALL`, `LLM_RESULT`;
//! docs/llm.md).

use serde_json::Value;

use super::error::{FinishReason, LlmError};
use super::stream::{Completion, ModelCall, Usage};
use crate::bindings::agenthost::agent::llm as wit;
use crate::error::{Error, HostError};

/// The aliases of the manifest's `[llm.<alias>]` models, in name order
/// (empty when it declares none).
pub fn declared_models() -> Vec<String> {
    wit::aliases()
}

/// The alias a [`ChatLoop`](super::ChatLoop) uses when none is set: `main`
/// if declared, else the first declared; none when none is declared.
pub(crate) fn default_alias() -> Option<String> {
    let aliases = declared_models();
    if aliases.iter().any(|a| a == "main") {
        return Some("main".into());
    }
    aliases.into_iter().next()
}

/// One completion of `alias` through the host: its text is already in the
/// turn's journal (one assistant message), its tool calls are returned.
pub(crate) fn complete(
    alias: &str,
    messages: &[Value],
    tools: &[Value],
) -> Result<Completion, Error> {
    let request = wit::CompletionRequest {
        alias: alias.to_owned(),
        messages: Value::Array(messages.to_vec()).to_string(),
        tools: Value::Array(tools.to_vec()).to_string(),
        parameters: "{}".into(),
    };
    let done = wit::complete(&request).map_err(|e| match e {
        wit::LlmError::UnknownAlias(m) => Error::Llm(LlmError::Config(m)),
        wit::LlmError::InvalidRequest(m) => Error::Llm(LlmError::Config(m)),
        wit::LlmError::Failed(m) => Error::Llm(LlmError::Declared(m)),
        wit::LlmError::Host(e) => Error::Host(HostError::from_wit(e)),
    })?;
    Ok(Completion {
        text: done.text,
        tool_calls: (done.tool_calls.into_iter())
            .map(|c| ModelCall {
                id: Some(c.id),
                name: c.name,
                arguments: c.arguments,
            })
            .collect(),
        finish_reason: FinishReason::parse(&done.finish_reason),
        usage: Some(Usage {
            prompt_tokens: done.input_tokens,
            completion_tokens: done.output_tokens,
        }),
    })
}
