//! `Turn`: what one turn starts from (session, number, route, reason, input)
//! and the session-wide effects. Messages, history and tools add their own
//! methods in their modules.

use std::rc::Rc;

use serde_json::Value;

use crate::bindings::agenthost::agent::host;
use crate::bindings::agenthost::agent::types as wit;
use crate::error::{Error, host};
use crate::tools::{Tool, ToolCall, ToolResult};

/// One turn of a session, handed to [`Agent::handle`](crate::Agent::handle).
///
/// Every turn runs in a fresh instance: what the agent needs from earlier
/// turns it reads back with [`Turn::history`].
pub struct Turn {
    session_id: String,
    number: u32,
    route: String,
    pub(crate) reason: Reason,
    input: Value,
    pub(crate) tools: Rc<[Tool]>,
    pub(crate) calls_named: u32,
    /// The resumed step's results, once the SDK has run it (`resume`).
    pub(crate) resumed: Option<Vec<ToolResult>>,
    /// The MCP servers' tools, once listed in this turn (`mcp`).
    pub(crate) mcp_tools: Option<Vec<crate::mcp::McpTool>>,
}

/// Why a turn runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// A new input: the session was created or received a follow-up input.
    Input,
    /// A human decided on the gated tool call that suspended the previous turn.
    ApprovalDecision(Decision),
}

/// A human's decision on a gated tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Whether the human approved the call (with [`Decision::result`], the
    /// approval answered it in place of the tool, which did not run).
    pub approved: bool,
    /// Who decided (free text).
    pub approver: String,
    /// The call that waited for the decision (its id is always set).
    pub call: ToolCall,
    /// Every call of the suspended step, in the order the agent proposed
    /// them, [`Decision::call`] included (each id is set). The SDK runs them
    /// before [`Agent::handle`](crate::Agent::handle) is called: their
    /// results are [`Turn::resumed`].
    pub step: Vec<ToolCall>,
    /// A note from the human who decided, for example why the call was
    /// denied (a denied call's output carries it too, so a model sees it).
    pub message: Option<String>,
    /// The result the human gave in place of the tool: the tool did not run,
    /// and this is the pending call's output.
    pub result: Option<Value>,
    /// The agent's own arguments, when the human edited them:
    /// [`Decision::call`] holds the edited ones, which the tool ran with.
    pub original_arguments: Option<Value>,
}

impl Decision {
    /// Converts the raw record, keeping the step's order.
    pub(crate) fn from_wit(decision: wit::Decision) -> Self {
        Decision {
            approved: decision.approved,
            approver: decision.approver,
            call: ToolCall::from_wit(decision.pending_tool_call),
            step: decision.step.into_iter().map(ToolCall::from_wit).collect(),
            message: None,
            result: None,
            original_arguments: None,
        }
    }
}

impl Turn {
    /// Builds a turn from the raw record; fails if the input is not JSON.
    pub(crate) fn from_wit(turn: wit::Turn, tools: Rc<[Tool]>) -> Result<Self, Error> {
        let input = serde_json::from_str(&turn.input)
            .map_err(|e| Error::BadInput(format!("the turn's input is not JSON: {e}")))?;
        let reason = match turn.reason {
            wit::Reason::Input => Reason::Input,
            wit::Reason::ApprovalDecision(d) => Reason::ApprovalDecision(Decision::from_wit(d)),
        };
        Ok(Turn {
            session_id: turn.session_id,
            number: turn.turn,
            route: turn.route,
            reason,
            input,
            tools,
            calls_named: 0,
            resumed: None,
            mcp_tools: None,
        })
    }

    /// The session's id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The turn's number: 1 for the session's first turn, then 2, 3, ...
    pub fn number(&self) -> u32 {
        self.number
    }

    /// The route the session was created on, such as `/chat`.
    pub fn route(&self) -> &str {
        &self.route
    }

    /// Why this turn runs.
    pub fn reason(&self) -> &Reason {
        &self.reason
    }

    /// The decision this turn resumes from, if its reason is one.
    pub fn decision(&self) -> Option<&Decision> {
        match &self.reason {
            Reason::ApprovalDecision(d) => Some(d),
            Reason::Input => None,
        }
    }

    /// The turn's input (for a resumed turn, the input of the turn it resumes).
    pub fn input(&self) -> &Value {
        &self.input
    }

    /// The input as text: a JSON string, or the string field `text` of an object.
    pub fn input_text(&self) -> Option<&str> {
        input_text(&self.input)
    }

    /// Ends the session after this turn: it accepts no more input.
    pub fn end_session(&self) -> Result<(), Error> {
        host(host::end_session())
    }

    /// A first turn on `/test` with a null input and no tools, for unit tests.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Self {
        Turn {
            session_id: "s1".into(),
            number: 1,
            route: "/test".into(),
            reason: Reason::Input,
            input: Value::Null,
            tools: Rc::from(Vec::new()),
            calls_named: 0,
            resumed: None,
            mcp_tools: None,
        }
    }
}

/// The text of an input: a JSON string, or an object's string field `text`.
pub(crate) fn input_text(input: &Value) -> Option<&str> {
    match input {
        Value::String(text) => Some(text),
        Value::Object(fields) => fields.get("text").and_then(Value::as_str),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn input_text_reads_strings_and_text_fields() {
        assert_eq!(input_text(&json!("hello")), Some("hello"));
        assert_eq!(input_text(&json!({"text": "hi", "x": 1})), Some("hi"));
        assert_eq!(input_text(&json!({"text": 3})), None);
        assert_eq!(input_text(&json!({"sleep_ms": 5})), None);
        assert_eq!(input_text(&json!(["a"])), None);
    }

    fn wit_call(id: &str, name: &str, arguments: &str) -> wit::ToolCall {
        wit::ToolCall {
            tool_call_id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn turns_parse_input_and_decisions() {
        let raw = wit::Turn {
            session_id: "s".into(),
            turn: 2,
            route: "/chat".into(),
            reason: wit::Reason::ApprovalDecision(wit::Decision {
                approved: false,
                approver: "alice".into(),
                pending_tool_call: wit_call("call_1_1", "rm", "{\"path\":\"/\"}"),
                step: vec![wit_call("call_1_1", "rm", "{\"path\":\"/\"}")],
            }),
            input: "{\"text\":\"go\"}".into(),
        };
        let turn = Turn::from_wit(raw, Rc::from(Vec::new())).unwrap();
        assert_eq!(turn.input_text(), Some("go"));
        let decision = turn.decision().unwrap();
        assert!(!decision.approved);
        assert_eq!(decision.call.arguments, json!({"path": "/"}));
        assert_eq!(decision.step, vec![decision.call.clone()]);

        let bad = wit::Turn {
            session_id: "s".into(),
            turn: 1,
            route: "/chat".into(),
            reason: wit::Reason::Input,
            input: "not json".into(),
        };
        assert!(matches!(
            Turn::from_wit(bad, Rc::from(Vec::new())),
            Err(Error::BadInput(_))
        ));
    }

    #[test]
    fn decisions_keep_the_step_in_order() {
        let decision = Decision::from_wit(wit::Decision {
            approved: true,
            approver: "bob".into(),
            pending_tool_call: wit_call("c2", "delete", "{\"name\":\"b\"}"),
            step: vec![
                wit_call("c1", "add", "{\"name\":\"a\"}"),
                wit_call("c2", "delete", "{\"name\":\"b\"}"),
                wit_call("c3", "add", "{\"name\":\"c\"}"),
            ],
        });
        let ids: Vec<_> = decision.step.iter().map(|c| c.id.as_deref()).collect();
        assert_eq!(ids, vec![Some("c1"), Some("c2"), Some("c3")]);
        assert_eq!(decision.step[1], decision.call);
        assert_eq!(decision.step[2].arguments, json!({"name": "c"}));
    }
}
