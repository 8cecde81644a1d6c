//! Tools: calls, results, the registry of handlers, and the step protocol
//! (`Turn::run_tools`; resuming a suspended step is in `resume`).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::agenthost::agent::host;
use crate::bindings::agenthost::agent::types as wit;
use crate::error::{Error, host};
use crate::turn::Turn;

/// One tool call: a tool's name and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// Unique within the session (the tool's idempotency key). `None` lets
    /// [`Turn::run_tools`] generate one (`call_<turn>_<n>`).
    pub id: Option<String>,
    /// The tool's name, as registered with [`Setup::tool`](crate::Setup::tool).
    pub name: String,
    /// The arguments, a JSON value (usually an object).
    pub arguments: Value,
}

impl ToolCall {
    /// A call of tool `name` whose id the SDK generates.
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            id: None,
            name: name.into(),
            arguments,
        }
    }

    /// Sets the call's id (for example the id a model gave it).
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Converts a call the host hands back. Arguments that are not JSON are
    /// kept as a JSON string, so the handler reports them as invalid.
    pub(crate) fn from_wit(call: wit::ToolCall) -> Self {
        let arguments =
            serde_json::from_str(&call.arguments).unwrap_or(Value::String(call.arguments));
        ToolCall {
            id: Some(call.tool_call_id),
            name: call.name,
            arguments,
        }
    }
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    /// The handler returned `Ok`.
    Ok,
    /// The handler returned `Err`, or the tool is unknown, or its arguments did not fit.
    Error,
    /// A human denied the call.
    Denied,
}

/// The outcome of one tool call, as reported to the host (TOOL_RESULT).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The call's id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// How the call ended.
    pub status: ToolStatus,
    /// The handler's output, or for an error or a denial a JSON string saying why.
    pub output: Value,
}

/// A type-erased tool handler.
pub(crate) type Handler = Box<dyn Fn(&mut Turn, Value) -> Result<Value, String>>;

/// A registered tool: its spec and its handler.
pub(crate) struct Tool {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) parameters: Value,
    pub(crate) needs_approval: bool,
    pub(crate) handler: Handler,
}

/// Wraps a typed handler: arguments are deserialized into `T`, the output serialized.
pub(crate) fn erase<T, R, F>(handler: F) -> Handler
where
    T: DeserializeOwned,
    R: Serialize,
    F: Fn(&mut Turn, T) -> Result<R, String> + 'static,
{
    Box::new(move |turn, arguments| {
        let arguments =
            serde_json::from_value(arguments).map_err(|e| format!("invalid arguments: {e}"))?;
        let output = handler(turn, arguments)?;
        serde_json::to_value(output).map_err(|e| format!("invalid output: {e}"))
    })
}

/// The id the SDK gives the `n`th call (from 1) it names in turn `turn`.
/// Turn numbers are unique in a session, so these ids are too.
pub(crate) fn call_id(turn: u32, n: u32) -> String {
    format!("call_{turn}_{n}")
}

impl Turn {
    /// Runs one step of tool calls: hands them to the host (one TOOL_CALL
    /// each), then, unless one of them needs a human decision, runs each
    /// handler in order and reports its result. An empty step does nothing.
    ///
    /// Returns [`Error::ToolApprovalRequired`] when the host suspends the turn
    /// (none of the step's calls has run, and every further effect of this
    /// turn is refused): propagate it with `?` and the turn ends cleanly; the
    /// agent resumes in a new turn where the SDK runs the step (the gated call
    /// only if approved) before `handle` is called, its results in
    /// [`Turn::resumed`]. A step with two or more gated calls is not
    /// suspended: the host fails the turn.
    pub fn run_tools(&mut self, calls: Vec<ToolCall>) -> Result<Vec<ToolResult>, Error> {
        self.run_step(calls, None)
    }

    /// Like [`Turn::run_tools`], with the agent's explanation of the step,
    /// shown to the human who decides on a gated call.
    pub fn run_tools_with_reason(
        &mut self,
        calls: Vec<ToolCall>,
        reason: &str,
    ) -> Result<Vec<ToolResult>, Error> {
        self.run_step(calls, Some(reason))
    }

    fn run_step(
        &mut self,
        calls: Vec<ToolCall>,
        reason: Option<&str>,
    ) -> Result<Vec<ToolResult>, Error> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        let calls: Vec<(String, ToolCall)> = calls
            .into_iter()
            .map(|call| (call.id.clone().unwrap_or_else(|| self.next_call_id()), call))
            .collect();
        let wire: Vec<wit::ToolCall> = calls
            .iter()
            .map(|(id, call)| wit::ToolCall {
                tool_call_id: id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.to_string(),
            })
            .collect();
        match host(host::tool_calls(&wire, reason))? {
            wit::Step::Suspend(call) => Err(Error::ToolApprovalRequired(ToolCall::from_wit(call))),
            wit::Step::Run => {
                let mut results = Vec::with_capacity(calls.len());
                for (id, call) in calls {
                    let result = if self.is_mcp_tool(&call.name) {
                        // The host runs it and journals its result.
                        self.call_mcp(id, call.name)?
                    } else {
                        let result = self.invoke(id, call);
                        report(&result)?;
                        result
                    };
                    results.push(result);
                }
                Ok(results)
            }
        }
    }

    /// Runs a call's handler (without reporting it).
    pub(crate) fn invoke(&mut self, id: String, call: ToolCall) -> ToolResult {
        let tools = self.tools.clone();
        let outcome = match tools.iter().find(|t| t.name == call.name) {
            Some(tool) => (tool.handler)(self, call.arguments),
            None => Err(format!("unknown tool: {}", call.name)),
        };
        let (status, output) = match outcome {
            Ok(output) => (ToolStatus::Ok, output),
            Err(message) => (ToolStatus::Error, Value::String(message)),
        };
        ToolResult {
            id,
            name: call.name,
            status,
            output,
        }
    }

    fn next_call_id(&mut self) -> String {
        self.calls_named += 1;
        call_id(self.number(), self.calls_named)
    }
}

/// Reports a result to the host (TOOL_RESULT).
pub(crate) fn report(result: &ToolResult) -> Result<(), Error> {
    let status = match result.status {
        ToolStatus::Ok => wit::ToolStatus::Ok,
        ToolStatus::Error => wit::ToolStatus::Error,
        ToolStatus::Denied => wit::ToolStatus::Denied,
    };
    host(host::tool_result(
        &result.id,
        &result.output.to_string(),
        status,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn generated_ids_name_the_turn_and_count_from_one() {
        assert_eq!(call_id(3, 1), "call_3_1");
        assert_ne!(call_id(1, 12), call_id(11, 2));
    }

    #[test]
    fn typed_handlers_check_their_arguments() {
        #[derive(serde::Deserialize)]
        struct Args {
            text: String,
        }
        let handler = erase(|_: &mut Turn, args: Args| Ok(args.text.len()));
        let mut turn = Turn::for_tests();
        assert_eq!(handler(&mut turn, json!({"text": "four"})), Ok(json!(4)));
        let err = handler(&mut turn, json!({"txt": 1})).unwrap_err();
        assert!(err.starts_with("invalid arguments"), "{err}");
    }

    #[test]
    fn returned_calls_keep_bad_arguments_as_text() {
        let call = ToolCall::from_wit(wit::ToolCall {
            tool_call_id: "c1".into(),
            name: "t".into(),
            arguments: "{not json".into(),
        });
        assert_eq!(call.id.as_deref(), Some("c1"));
        assert_eq!(call.arguments, json!("{not json"));
    }
}
