//! A model loop for agents: [`ChatLoop`] calls an OpenAI-compatible chat
//! completions API, streams the model's text into the session as an
//! assistant message, hands the tool calls it asks for to the host (so gated
//! ones wait for a human), runs the others, and calls the model again until
//! it answers.
//!
//! ```no_run
//! use agenthost_sdk::llm::ChatLoop;
//! use agenthost_sdk::{Agent, Error, Setup, Turn};
//!
//! struct Assistant;
//!
//! impl Agent for Assistant {
//!     fn setup(agent: &mut Setup) {
//!         agent.route("/chat");
//!     }
//!
//!     fn handle(turn: &mut Turn) -> Result<(), Error> {
//!         ChatLoop::new("You are a helpful assistant.").run(turn)
//!     }
//! }
//!
//! agenthost_sdk::export_agent!(Assistant);
//! ```
//!
//! The model is one the manifest declares, when it declares any
//! (`[llm.<alias>]`, docs/llm.md): the host holds its key, sends the
//! request, streams the text straight into the turn's message, journals
//! `LLM_CALL` / `LLM_RESULT` and fails over to the alias's `fallbacks`.
//! The loop uses the alias set with [`ChatLoop::alias`], else `main` if
//! declared, else the first declared ([`declared_models`]).
//!
//! Otherwise the model is called over the agent's own outbound HTTP and
//! configured from the environment ([`ModelConfig::from_env`]):
//! declare `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `OPENAI_MODEL` in the
//! manifest's `[agent] secrets`, and put the API's origin in its
//! `[outbound] allow`.
//!
//! Each call rebuilds the conversation from the session's journal (nothing
//! is kept anywhere else): the user's inputs, the assistant's messages, its
//! tool calls and their results (a denied call is shown to the model as
//! denied). Compatibility is claimed for the chunk shapes the SDK's tests
//! replay (those OpenAI documents: text deltas, tool-call fragments keyed by
//! `index`, parallel calls, a usage-only last chunk, `[DONE]`).

mod client;
mod config;
mod conversation;
mod declared;
mod error;
mod stream;

use serde_json::Value;

use crate::error::{Error, HostError};
use crate::message::Message;
use crate::tools::ToolCall;
use crate::turn::Turn;

pub use config::{DEFAULT_BASE_URL, ModelConfig};
pub use declared::declared_models;
pub use error::{FinishReason, LlmError};

use stream::ModelCall;

/// How many model calls a turn may make by default.
pub const DEFAULT_MAX_ROUNDS: u32 = 8;

/// The model loop of a turn. Build it with a system prompt, then
/// [`run`](ChatLoop::run) it on each turn (a new input or a resumed one).
///
/// A run:
/// 1. (on a turn resumed by an approval decision, the SDK has already run
///    the suspended step before `handle` was called: the approved call ran,
///    a denied one was reported `denied`, and the journal has their results,
///    which the conversation carries to the model);
/// 2. rebuilds the conversation from the journal and calls the model with
///    the agent's tools (those declared in [`Setup::tool`](crate::Setup::tool));
/// 3. streams its text into one assistant message;
/// 4. if it asked for tools, hands the calls to the host in steps (each step
///    holds at most one call known to be gated: its code flag or the
///    operator's `SERVICE_APPROVAL_POLICY`), runs them, and goes back to 2;
///    a gated call suspends the turn (the run returns
///    [`Error::ToolApprovalRequired`]; pass it on with `?`), and the turn
///    that resumes from the decision runs the loop again;
/// 5. ends when the model answers without tool calls.
///
/// Errors end the turn with a TURN_ERROR whose message says what happened:
/// [`Error::Llm`] (the key refused, rate limited after retries, a provider
/// error, a malformed stream, an answer cut off, more than
/// [`max_rounds`](ChatLoop::max_rounds) model calls) or [`Error::Http`] (the
/// API's origin not on the outbound allowlist, a connection that failed).
#[derive(Debug, Clone)]
pub struct ChatLoop {
    system_prompt: String,
    max_rounds: u32,
    config: Option<ModelConfig>,
    alias: Option<String>,
}

/// Where a run's model calls go.
enum Route {
    /// A declared model, through the host.
    Declared(String),
    /// The agent's own outbound HTTP.
    Outbound(ModelConfig),
}

impl ChatLoop {
    /// A loop whose conversations start with `system_prompt` (none if empty).
    pub fn new(system_prompt: impl Into<String>) -> Self {
        ChatLoop {
            system_prompt: system_prompt.into(),
            max_rounds: DEFAULT_MAX_ROUNDS,
            config: None,
            alias: None,
        }
    }

    /// At most `rounds` model calls per turn (at least 1; default
    /// [`DEFAULT_MAX_ROUNDS`]). A model that still asks for tools in the
    /// last round ends the turn with [`LlmError::TooManyRounds`].
    pub fn max_rounds(mut self, rounds: u32) -> Self {
        self.max_rounds = rounds.max(1);
        self
    }

    /// Uses `config` instead of reading [`ModelConfig::from_env`] at each run.
    pub fn config(mut self, config: ModelConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// Calls the declared model `alias` (`[llm.<alias>]` of the manifest)
    /// through the host, instead of the default one.
    pub fn alias(mut self, alias: impl Into<String>) -> Self {
        self.alias = Some(alias.into());
        self
    }

    /// Where this run's model calls go: an explicit config, else the set
    /// alias, else a declared model, else the environment's config.
    fn route(&self) -> Result<Route, Error> {
        if let Some(config) = &self.config {
            return Ok(Route::Outbound(config.clone()));
        }
        if let Some(alias) = self.alias.clone().or_else(declared::default_alias) {
            return Ok(Route::Declared(alias));
        }
        Ok(Route::Outbound(ModelConfig::from_env()?))
    }

    /// Runs the loop for this turn (see [`ChatLoop`]).
    pub fn run(&self, turn: &mut Turn) -> Result<(), Error> {
        let route = self.route()?;
        let tools = turn.tools.clone();
        // The MCP servers' tools, offered beside the agent's own.
        let mcp = turn.mcp_tools()?;
        let policy = approval_policy();
        let gated = |name: &str| {
            policy.iter().any(|p| p == name)
                || tools.iter().any(|t| t.name == name && t.needs_approval)
                || mcp.iter().any(|t| t.name == name && t.needs_approval)
        };
        for _ in 0..self.max_rounds {
            let messages = conversation::rebuild(&self.system_prompt, turn.history())?;
            let completion = match &route {
                Route::Declared(alias) => {
                    let messages: Vec<Value> = messages.iter().map(|m| m.to_json()).collect();
                    let offered = client::offered_tools(&tools, &mcp);
                    match declared::complete(alias, &messages, &offered) {
                        // The host closed the turn (paused at the LLM budget,
                        // or suspended): it decides how the turn ends, and a
                        // raised budget reruns it from the journal.
                        Err(Error::Host(HostError::Closed(_))) => return Ok(()),
                        other => other?,
                    }
                }
                Route::Outbound(config) => {
                    let body = client::request_body(config, &messages, &tools, &mcp);
                    let completion = stream_reply(turn, config, &body)?;
                    if let Some(usage) = completion.usage {
                        eprintln!(
                            "agenthost-sdk: model {} used {} prompt and {} completion tokens",
                            config.model, usage.prompt_tokens, usage.completion_tokens
                        );
                    }
                    completion
                }
            };
            match completion.finish_reason {
                FinishReason::Length | FinishReason::ContentFilter => {
                    return Err(LlmError::Stopped(completion.finish_reason).into());
                }
                _ if completion.tool_calls.is_empty() => return Ok(()),
                _ => {}
            }
            let reason = step_reason(&completion.text, &completion.tool_calls);
            let calls = completion
                .tool_calls
                .into_iter()
                .map(to_tool_call)
                .collect();
            for step in steps(calls, &gated) {
                // A gated call suspends the turn here: the error ends it cleanly.
                turn.run_tools_with_reason(step, &reason)?;
            }
        }
        Err(LlmError::TooManyRounds(self.max_rounds).into())
    }
}

/// One model call, its text streamed into an assistant message (opened at
/// the first text, so a reply with only tool calls writes no message).
fn stream_reply(
    turn: &Turn,
    config: &ModelConfig,
    body: &Value,
) -> Result<stream::Completion, Error> {
    let mut message: Option<Message> = None;
    let completion = client::complete(config, body, &mut |text| {
        let open = match &mut message {
            Some(open) => open,
            None => message.insert(turn.message()?),
        };
        open.write(text)
    })?;
    if let Some(message) = message {
        message.finish()?;
    }
    Ok(completion)
}

/// The tool names in the operator's `SERVICE_APPROVAL_POLICY` (a JSON
/// array), which the host also gates.
fn approval_policy() -> Vec<String> {
    std::env::var("SERVICE_APPROVAL_POLICY")
        .ok()
        .and_then(|policy| serde_json::from_str(&policy).ok())
        .unwrap_or_default()
}

/// A model's call as the SDK journals it: its own id (`call_<turn>_<n>`),
/// and the arguments as JSON (`{}` when empty; text that is not JSON kept as
/// a string, which the tool's handler reports as invalid).
fn to_tool_call(call: ModelCall) -> ToolCall {
    let raw = call.arguments.trim();
    let arguments = if raw.is_empty() {
        Value::Object(Default::default())
    } else {
        serde_json::from_str(raw).unwrap_or_else(|_| Value::String(call.arguments.clone()))
    };
    ToolCall::new(call.name, arguments)
}

/// What the human deciding on a gated call is shown: the model's own words
/// before its calls, or which tools it asked for.
fn step_reason(text: &str, calls: &[ModelCall]) -> String {
    let text = text.trim();
    if !text.is_empty() {
        let mut end = text.len().min(1000);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        return text[..end].to_owned();
    }
    let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
    format!("the model asked to call {}", names.join(", "))
}

/// Splits one model reply's calls into steps, in order, so that no step holds
/// two calls known to be gated (the host refuses such a step). A call
/// gated only by the manifest is not known here.
fn steps(calls: Vec<ToolCall>, gated: &dyn Fn(&str) -> bool) -> Vec<Vec<ToolCall>> {
    let mut steps: Vec<Vec<ToolCall>> = Vec::new();
    let mut step_has_gated = false;
    for call in calls {
        let is_gated = gated(&call.name);
        match steps.last_mut() {
            Some(step) if !(is_gated && step_has_gated) => step.push(call),
            _ => {
                steps.push(vec![call]);
                step_has_gated = false;
            }
        }
        step_has_gated |= is_gated;
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn model_call(name: &str, arguments: &str) -> ModelCall {
        ModelCall {
            id: Some("x".into()),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn model_calls_become_journaled_calls() {
        let call = to_tool_call(model_call("lookup_order", r#"{"order_id":"A1"}"#));
        assert_eq!(call.id, None, "the SDK names its own ids");
        assert_eq!(call.arguments, json!({"order_id": "A1"}));
        assert_eq!(to_tool_call(model_call("t", "  ")).arguments, json!({}));
        assert_eq!(
            to_tool_call(model_call("t", "{oops")).arguments,
            json!("{oops")
        );
    }

    #[test]
    fn no_step_holds_two_known_gated_calls() {
        let call = |name: &str| ToolCall::new(name, json!({}));
        let gated = |name: &str| name.starts_with("refund");
        let names = |steps: Vec<Vec<ToolCall>>| -> Vec<Vec<String>> {
            steps
                .into_iter()
                .map(|s| s.into_iter().map(|c| c.name).collect())
                .collect()
        };
        assert_eq!(
            names(steps(
                vec![
                    call("lookup"),
                    call("refund1"),
                    call("lookup2"),
                    call("refund2"),
                    call("x")
                ],
                &gated
            )),
            vec![vec!["lookup", "refund1", "lookup2"], vec!["refund2", "x"]]
        );
        assert_eq!(
            names(steps(vec![call("a"), call("b")], &gated)),
            vec![vec!["a", "b"]]
        );
        assert!(steps(Vec::new(), &gated).is_empty());
    }

    #[test]
    fn the_step_reason_is_the_models_words_or_the_tools() {
        let calls = vec![
            model_call("refund_order", "{}"),
            model_call("lookup_order", "{}"),
        ];
        assert_eq!(
            step_reason("  I will refund it. ", &calls),
            "I will refund it."
        );
        assert_eq!(
            step_reason("", &calls),
            "the model asked to call refund_order, lookup_order"
        );
        assert_eq!(step_reason(&"é".repeat(800), &calls).len(), 1000);
    }
}
