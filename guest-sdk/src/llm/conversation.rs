//! The model's conversation, rebuilt from the session's journal each time
//! the model is called: user inputs, the assistant's messages, its tool
//! calls (one step's `TOOL_CALL`s become one assistant message with
//! `tool_calls`) and their results (`role: tool`). Nothing else is kept.

use serde_json::{Value, json};

use crate::error::Error;
use crate::history::Event;
use crate::journal;
use crate::turn::input_text;

/// One message of an OpenAI chat completions conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChatMsg {
    /// The agent's instructions.
    System(String),
    /// What the user said.
    User(String),
    /// What the model said, and the tool calls it asked for.
    Assistant {
        content: Option<String>,
        tool_calls: Vec<CallRef>,
    },
    /// A tool call's result.
    Tool { call_id: String, content: String },
}

/// A tool call as the model is shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallRef {
    pub(crate) id: String,
    pub(crate) name: String,
    /// JSON text.
    pub(crate) arguments: String,
}

/// What the model is told about a call that never got a result (its turn
/// failed, or handed over more gated calls than one step may hold).
pub(crate) const NO_RESULT: &str = "no result: the turn ended before this call ran";

impl ChatMsg {
    /// The message as the chat completions API takes it.
    pub(crate) fn to_json(&self) -> Value {
        match self {
            ChatMsg::System(text) => json!({"role": "system", "content": text}),
            ChatMsg::User(text) => json!({"role": "user", "content": text}),
            ChatMsg::Assistant {
                content,
                tool_calls,
            } => {
                let mut message = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    message["tool_calls"] = tool_calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": call.arguments},
                            })
                        })
                        .collect();
                }
                message
            }
            ChatMsg::Tool { call_id, content } => {
                json!({"role": "tool", "tool_call_id": call_id, "content": content})
            }
        }
    }
}

/// Arguments as the model is shown them: a string is the model's own text
/// (kept as is when it was not JSON), anything else its JSON text.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// What the model is told a call returned.
fn result_content(status: &str, output: &Value) -> String {
    let text = match output {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    match status {
        "ok" => text,
        "error" => format!("error: {text}"),
        "denied" => {
            format!("denied: a human reviewer denied this call, so it did not run ({text})")
        }
        other => format!("{other}: {text}"),
    }
}

/// Walks the journal and builds the conversation.
#[derive(Default)]
struct Builder {
    messages: Vec<ChatMsg>,
    /// The last message is an assistant message of the current model round:
    /// tool calls that follow belong to it.
    assistant_open: bool,
    /// Calls of the last tool-call message that have no result yet, in order.
    pending: Vec<String>,
}

impl Builder {
    /// Before a message other than a tool result: every call still without
    /// a result gets one, so the conversation stays valid.
    fn settle(&mut self) {
        for call_id in std::mem::take(&mut self.pending) {
            self.messages.push(ChatMsg::Tool {
                call_id,
                content: NO_RESULT.into(),
            });
        }
    }

    fn push(&mut self, message: ChatMsg) {
        self.settle();
        self.assistant_open = matches!(message, ChatMsg::Assistant { .. });
        self.messages.push(message);
    }

    fn event(&mut self, event: &Event) {
        match event.event_type.as_str() {
            journal::TURN_STARTED => {
                self.assistant_open = false;
                let Some(started) = event.payload_as::<journal::TurnStarted>() else {
                    return;
                };
                let input = &started.input;
                // A text input has its user message next; other inputs only live here.
                if started.reason["kind"] == "input"
                    && !input.is_null()
                    && input_text(input).is_none()
                {
                    self.push(ChatMsg::User(input.to_string()));
                }
            }
            journal::MESSAGE_END => {
                let Some(end) = event.payload_as::<journal::MessageEnd>() else {
                    return;
                };
                match end.role.as_str() {
                    "user" => self.push(ChatMsg::User(end.text)),
                    "assistant" if !end.text.is_empty() => self.push(ChatMsg::Assistant {
                        content: Some(end.text),
                        tool_calls: Vec::new(),
                    }),
                    _ => {}
                }
            }
            journal::TOOL_CALL => {
                let Some(tool_call) = event.payload_as::<journal::ToolCall>() else {
                    return;
                };
                let id = tool_call.tool_call_id;
                let call = CallRef {
                    id: id.clone(),
                    name: tool_call.name,
                    arguments: arguments_text(&tool_call.arguments),
                };
                if !self.assistant_open {
                    self.push(ChatMsg::Assistant {
                        content: None,
                        tool_calls: Vec::new(),
                    });
                }
                if let Some(ChatMsg::Assistant { tool_calls, .. }) = self.messages.last_mut() {
                    tool_calls.push(call);
                }
                self.pending.push(id);
            }
            journal::TOOL_RESULT => {
                self.assistant_open = false;
                let Some(result) = event.payload_as::<journal::ToolResult>() else {
                    return;
                };
                // Only a call still waiting (its message is the last non-tool one).
                if let Some(at) = self.pending.iter().position(|p| *p == result.tool_call_id) {
                    self.pending.remove(at);
                    self.messages.push(ChatMsg::Tool {
                        content: result_content(&result.status, &result.output),
                        call_id: result.tool_call_id,
                    });
                }
            }
            // Lifecycle events (approvals, HTTP_REQUEST, ...) and types this
            // SDK does not know say nothing to the model.
            _ => {}
        }
    }
}

/// The conversation for the model: `system` (if not empty), then what the
/// journal `events` hold.
pub(crate) fn rebuild(
    system: &str,
    events: impl IntoIterator<Item = Result<Event, Error>>,
) -> Result<Vec<ChatMsg>, Error> {
    let mut builder = Builder::default();
    if !system.is_empty() {
        builder.messages.push(ChatMsg::System(system.to_owned()));
    }
    for event in events {
        builder.event(&event?);
    }
    builder.settle();
    Ok(builder.messages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The ids of the calls in `messages` (to check a conversation in tests).
    fn call_ids(messages: &[ChatMsg]) -> BTreeSet<String> {
        messages
            .iter()
            .flat_map(|m| match m {
                ChatMsg::Assistant { tool_calls, .. } => {
                    tool_calls.iter().map(|c| c.id.clone()).collect()
                }
                _ => Vec::new(),
            })
            .collect()
    }

    /// A journal: (type, payload) pairs numbered from 0.
    fn journal(events: Vec<(&str, Value)>) -> Vec<Result<Event, Error>> {
        events
            .into_iter()
            .enumerate()
            .map(|(seq, (event_type, payload))| {
                Ok(Event {
                    seq: seq as u64,
                    event_type: event_type.into(),
                    payload,
                })
            })
            .collect()
    }

    fn started(turn: u32, input: Value) -> (&'static str, Value) {
        (
            "TURN_STARTED",
            json!({"turn": turn, "reason": {"kind": "input"}, "input": input}),
        )
    }

    fn message(role: &str, text: &str) -> (&'static str, Value) {
        (
            "MESSAGE_END",
            json!({"message_id": "msg_1", "role": role, "text": text}),
        )
    }

    fn call(id: &str, name: &str, arguments: Value) -> (&'static str, Value) {
        (
            "TOOL_CALL",
            json!({"tool_call_id": id, "name": name, "arguments": arguments}),
        )
    }

    fn result(id: &str, status: &str, output: Value) -> (&'static str, Value) {
        (
            "TOOL_RESULT",
            json!({"tool_call_id": id, "name": "t", "status": status, "output": output}),
        )
    }

    fn lifecycle(event_type: &'static str) -> (&'static str, Value) {
        (
            event_type,
            json!({"method": "POST", "origin": "http://x", "status": 200}),
        )
    }

    fn call_ref(id: &str, name: &str, arguments: &str) -> CallRef {
        CallRef {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn a_conversation_with_tools_across_turns() {
        let events = journal(vec![
            ("SESSION_CREATED", json!({"input": "where is A1?"})),
            started(1, json!("where is A1?")),
            ("MESSAGE_START", json!({"message_id": "m", "role": "user"})),
            message("user", "where is A1?"),
            lifecycle("HTTP_REQUEST"),
            lifecycle("HTTP_RESPONSE"),
            message("assistant", "Let me look."),
            call("call_1_1", "lookup_order", json!({"order_id": "A1"})),
            call("call_1_2", "lookup_order", json!({"order_id": "B2"})),
            result("call_1_1", "ok", json!({"status": "shipped"})),
            result("call_1_2", "error", json!("no such order")),
            lifecycle("HTTP_REQUEST"),
            message("assistant", "A1 has shipped."),
            ("TURN_ENDED", json!({"turn": 1})),
            started(2, json!({"text": "thanks"})),
            message("user", "thanks"),
        ]);
        let messages = rebuild("Be brief.", events).unwrap();
        assert_eq!(
            messages,
            vec![
                ChatMsg::System("Be brief.".into()),
                ChatMsg::User("where is A1?".into()),
                ChatMsg::Assistant {
                    content: Some("Let me look.".into()),
                    tool_calls: vec![
                        call_ref("call_1_1", "lookup_order", r#"{"order_id":"A1"}"#),
                        call_ref("call_1_2", "lookup_order", r#"{"order_id":"B2"}"#),
                    ],
                },
                ChatMsg::Tool {
                    call_id: "call_1_1".into(),
                    content: r#"{"status":"shipped"}"#.into(),
                },
                ChatMsg::Tool {
                    call_id: "call_1_2".into(),
                    content: "error: no such order".into(),
                },
                ChatMsg::Assistant {
                    content: Some("A1 has shipped.".into()),
                    tool_calls: vec![],
                },
                ChatMsg::User("thanks".into()),
            ]
        );
        assert_eq!(
            messages[2].to_json(),
            json!({"role": "assistant", "content": "Let me look.", "tool_calls": [
                {"id": "call_1_1", "type": "function",
                 "function": {"name": "lookup_order", "arguments": "{\"order_id\":\"A1\"}"}},
                {"id": "call_1_2", "type": "function",
                 "function": {"name": "lookup_order", "arguments": "{\"order_id\":\"B2\"}"}},
            ]})
        );
        assert_eq!(
            messages[3].to_json(),
            json!({"role": "tool", "tool_call_id": "call_1_1", "content": "{\"status\":\"shipped\"}"})
        );
    }

    #[test]
    fn a_suspended_step_and_its_denied_call() {
        let events = journal(vec![
            started(1, json!("refund A1")),
            message("user", "refund A1"),
            call("call_1_1", "refund_order", json!({"order_id": "A1"})),
            (
                "TOOL_APPROVAL_REQUIRED",
                json!({"tool_call_id": "call_1_1", "name": "refund_order"}),
            ),
            (
                "TOOL_APPROVAL_DENIED",
                json!({"tool_call_id": "call_1_1", "approver": "alice"}),
            ),
            (
                "TURN_STARTED",
                json!({"turn": 2, "reason": {"kind": "approval_decision", "approved": false},
                       "input": "refund A1"}),
            ),
            result("call_1_1", "denied", json!("denied by alice")),
        ]);
        let messages = rebuild("", events).unwrap();
        assert_eq!(
            messages,
            vec![
                ChatMsg::User("refund A1".into()),
                ChatMsg::Assistant {
                    content: None,
                    tool_calls: vec![call_ref("call_1_1", "refund_order", r#"{"order_id":"A1"}"#)],
                },
                ChatMsg::Tool {
                    call_id: "call_1_1".into(),
                    content: "denied: a human reviewer denied this call, so it did not run \
                              (denied by alice)"
                        .into(),
                },
            ]
        );
        assert_eq!(messages[1].to_json()["content"], Value::Null);
    }

    #[test]
    fn calls_without_results_are_answered_so_the_conversation_stays_valid() {
        let events = journal(vec![
            started(1, json!("refund both")),
            message("user", "refund both"),
            call("call_1_1", "refund_order", json!({"order_id": "A1"})),
            call("call_1_2", "refund_order", json!({"order_id": "B2"})),
            (
                "TURN_ERROR",
                json!({"turn": 1, "kind": "multiple_gated_calls"}),
            ),
            started(2, json!("just A1 then")),
            message("user", "just A1 then"),
            call("call_2_1", "lookup_order", json!("{broken")),
        ]);
        let messages = rebuild("", events).unwrap();
        let tools: Vec<_> = messages
            .iter()
            .filter_map(|m| match m {
                ChatMsg::Tool { call_id, content } => Some((call_id.as_str(), content.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(
            tools,
            vec![
                ("call_1_1", NO_RESULT),
                ("call_1_2", NO_RESULT),
                ("call_2_1", NO_RESULT)
            ]
        );
        // The tool messages come right after their calls, before the next user message.
        assert!(matches!(messages[3], ChatMsg::Tool { .. }));
        assert_eq!(messages[4], ChatMsg::User("just A1 then".into()));
        // Arguments the model wrote that were not JSON are shown as written.
        assert!(matches!(&messages[5], ChatMsg::Assistant { tool_calls, .. }
            if tool_calls[0].arguments == "{broken"));
        assert_eq!(call_ids(&messages).len(), 3);
    }

    #[test]
    fn steps_after_results_are_new_assistant_messages_and_inputs_without_text_are_json() {
        let events = journal(vec![
            started(1, json!({"order": "A1"})),
            call("call_1_1", "lookup_order", json!({"order_id": "A1"})),
            result("call_1_1", "ok", json!("shipped")),
            call("call_1_2", "refund_order", json!({"order_id": "A1"})),
            result("call_1_2", "ok", json!({"refunded": true})),
            started(2, Value::Null),
            message("assistant", ""),
            ("SOMETHING_NEW", json!({"x": 1})),
        ]);
        let messages = rebuild("", events).unwrap();
        assert_eq!(messages[0], ChatMsg::User(r#"{"order":"A1"}"#.into()));
        assert!(
            matches!(&messages[1], ChatMsg::Assistant { tool_calls, .. } if tool_calls.len() == 1)
        );
        assert_eq!(
            messages[2],
            ChatMsg::Tool {
                call_id: "call_1_1".into(),
                content: "shipped".into()
            }
        );
        assert!(
            matches!(&messages[3], ChatMsg::Assistant { tool_calls, .. } if tool_calls[0].id == "call_1_2")
        );
        assert_eq!(messages.len(), 5, "{messages:?}");
    }

    #[test]
    fn history_errors_are_returned() {
        let events = vec![Err(Error::from("storage down"))];
        assert!(rebuild("", events).is_err());
    }
}
