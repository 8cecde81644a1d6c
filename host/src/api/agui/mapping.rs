//! The journal in AG-UI's vocabulary (docs/ag-ui.md, "The mapping"): a
//! `Mapper` reads a session's events in seq order and gives each one its
//! AG-UI events (none, one, or three for a tool call). A turn is a run.
//!
//! Plain Rust: the streams that send these (`super` and `api::events`)
//! number the frames and resume them.

use serde_json::{Value, json};
use uuid::Uuid;

use super::protocol::{
    AgUiEvent, Custom, HostMetadata, Interrupt, Metadata, Outcome, RunError, RunFinished,
    RunStarted, TextMessageContent, TextMessageEnd, TextMessageStart, ToolCallArgs, ToolCallEnd,
    ToolCallResult, ToolCallStart,
};
use crate::journal::payloads::{self, Delta, Role, StartReason};
use crate::journal::{EventType, StoredEvent};

/// How runs are named.
#[derive(Debug, Clone)]
enum Naming {
    /// The events endpoint: thread = the session id, run = `<session id>:<turn>`.
    Journal,
    /// A `POST /ag-ui/...` response: the client's thread and run ids.
    Client { thread_id: String, run_id: String },
}

/// The run (turn) being mapped.
#[derive(Debug, Clone)]
struct Run {
    thread_id: String,
    run_id: String,
    /// The next message, if it is a user message, is the run's input (which
    /// a POST response leaves out: the client sent it).
    input_next: bool,
}

/// Maps one session's journal, event after event, to AG-UI events.
#[derive(Debug, Clone)]
pub(crate) struct Mapper {
    session: Uuid,
    naming: Naming,
    run: Option<Run>,
    /// The user message being left out (POST responses only).
    skipping: Option<String>,
}

impl Mapper {
    /// The mapping of the events endpoint (`?format=ag-ui`).
    pub(crate) fn journal(session: Uuid) -> Mapper {
        Mapper {
            session,
            naming: Naming::Journal,
            run: None,
            skipping: None,
        }
    }

    /// The mapping of one run's POST response: named as the client named
    /// it, without the user message the client sent.
    pub(crate) fn client(session: Uuid, thread_id: String, run_id: String) -> Mapper {
        Mapper {
            session,
            naming: Naming::Client { thread_id, run_id },
            run: None,
            skipping: None,
        }
    }

    /// The AG-UI events of the next journal event. A journal event that
    /// cannot be read (it never happens: the host wrote it) maps to none.
    pub(crate) fn map(&mut self, event: &StoredEvent) -> Vec<AgUiEvent> {
        let Some(kind) = event.kind() else {
            tracing::warn!(event = %event.id, "unreadable journal event; not mapped to AG-UI");
            return Vec::new();
        };
        match self.map_event(kind, event) {
            Some(events) => events,
            None => {
                tracing::warn!(event = %event.id, "unreadable journal payload; not mapped to AG-UI");
                Vec::new()
            }
        }
    }

    /// `None` when the event's payload does not read as its type's.
    fn map_event(&mut self, kind: EventType, e: &StoredEvent) -> Option<Vec<AgUiEvent>> {
        if kind == EventType::TurnStarted {
            let p = e.payload::<payloads::TurnStarted>().ok()??;
            return Some(vec![self.start_run(p)]);
        }
        // Between runs there is nothing AG-UI can carry (SESSION_CREATED, a
        // decision, SESSION_ENDED): the next RUN_STARTED says what started it.
        let Some(run) = self.run.as_mut() else {
            return Some(Vec::new());
        };
        let input_next = std::mem::take(&mut run.input_next);
        let events = match kind {
            EventType::MessageStart => {
                let p = e.payload::<payloads::MessageStart>().ok()??;
                if input_next && p.role == Role::User && self.skips_input() {
                    self.skipping = Some(p.message_id);
                    return Some(Vec::new());
                }
                let role = match p.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                vec![AgUiEvent::TextMessageStart(TextMessageStart {
                    message_id: p.message_id,
                    role: role.into(),
                })]
            }
            EventType::MessageDelta => {
                let p = e.payload::<payloads::MessageDelta>().ok()??;
                if self.skipping.as_ref() == Some(&p.message_id) {
                    return Some(Vec::new());
                }
                let Delta::Text { text } = p.delta;
                vec![AgUiEvent::TextMessageContent(TextMessageContent {
                    message_id: p.message_id,
                    delta: text,
                })]
            }
            EventType::MessageEnd => {
                let p = e.payload::<payloads::MessageEnd>().ok()??;
                if self.skipping.as_ref() == Some(&p.message_id) {
                    self.skipping = None;
                    return Some(Vec::new());
                }
                let metadata = p.incomplete.and_then(|incomplete| {
                    HostMetadata {
                        incomplete: Some(incomplete),
                        ..HostMetadata::default()
                    }
                    .wrap()
                });
                vec![AgUiEvent::TextMessageEnd(TextMessageEnd {
                    message_id: p.message_id,
                    metadata,
                })]
            }
            EventType::ToolCall => {
                let p = e.payload::<payloads::ToolCall>().ok()??;
                vec![
                    AgUiEvent::ToolCallStart(ToolCallStart {
                        tool_call_id: p.tool_call_id.clone(),
                        tool_call_name: p.name,
                    }),
                    AgUiEvent::ToolCallArgs(ToolCallArgs {
                        tool_call_id: p.tool_call_id.clone(),
                        delta: p.arguments.to_string(),
                    }),
                    AgUiEvent::ToolCallEnd(ToolCallEnd {
                        tool_call_id: p.tool_call_id,
                    }),
                ]
            }
            EventType::ToolResult => {
                let p = e.payload::<payloads::ToolResult>().ok()??;
                vec![AgUiEvent::ToolCallResult(ToolCallResult {
                    message_id: format!("msg_{}", e.id.simple()),
                    tool_call_id: p.tool_call_id,
                    content: p.output.to_string(),
                    role: "tool".into(),
                    metadata: Metadata::of(HostMetadata {
                        status: Some(p.status),
                        name: Some(p.name),
                        ..HostMetadata::default()
                    }),
                })]
            }
            EventType::ToolApprovalRequired => {
                let p = e.payload::<payloads::ToolApprovalRequired>().ok()??;
                let run = self.run.take()?;
                let message = p
                    .reason
                    .unwrap_or_else(|| format!("Approve the call to `{}`?", p.name));
                vec![AgUiEvent::RunFinished(RunFinished {
                    thread_id: run.thread_id,
                    run_id: run.run_id,
                    outcome: Outcome::Interrupt {
                        interrupts: vec![Interrupt {
                            id: e.id.to_string(),
                            reason: "tool_call".into(),
                            message,
                            tool_call_id: p.tool_call_id,
                            response_schema: response_schema(),
                            expires_at: p.expires_at,
                            metadata: Metadata::of(HostMetadata {
                                session_id: Some(self.session),
                                name: Some(p.name),
                                arguments: Some(p.arguments),
                                gated_by: Some(p.gated_by),
                                ..HostMetadata::default()
                            }),
                        }],
                    },
                })]
            }
            EventType::TurnError => {
                let p = e.payload::<payloads::TurnError>().ok()??;
                self.run = None;
                vec![AgUiEvent::RunError(RunError {
                    message: p.message,
                    code: p.kind.as_str().into(),
                    metadata: HostMetadata {
                        session_id: Some(self.session),
                        turn: Some(p.turn),
                        ..HostMetadata::default()
                    }
                    .wrap(),
                })]
            }
            // The run stops here; raising the budget starts a new run.
            EventType::BudgetReached => {
                let value = e.payload_value().ok()?;
                self.run = None;
                vec![
                    AgUiEvent::Custom(Custom {
                        name: format!("agenthost.{}", kind.as_str()),
                        value,
                    }),
                    AgUiEvent::RunError(RunError {
                        message:
                            "the session's LLM budget is reached: the run resumes once it is raised"
                                .into(),
                        code: "budget_reached".into(),
                        metadata: HostMetadata {
                            session_id: Some(self.session),
                            ..HostMetadata::default()
                        }
                        .wrap(),
                    }),
                ]
            }
            EventType::TurnEnded => {
                let run = self.run.take()?;
                vec![AgUiEvent::RunFinished(RunFinished {
                    thread_id: run.thread_id,
                    run_id: run.run_id,
                    outcome: Outcome::Success,
                })]
            }
            EventType::HttpRequest
            | EventType::HttpRequestDenied
            | EventType::HttpResponse
            | EventType::InputQueued
            | EventType::TurnScheduled
            | EventType::TurnScheduleCancelled
            | EventType::LlmCall
            | EventType::LlmResult => {
                let value = e.payload_value().ok()?;
                vec![AgUiEvent::Custom(Custom {
                    name: format!("agenthost.{}", kind.as_str()),
                    value,
                })]
            }
            // Never inside a turn (order rules 1, 2 and 7).
            EventType::SessionCreated
            | EventType::TurnStarted
            | EventType::ToolApprovalGranted
            | EventType::ToolApprovalDenied
            | EventType::SessionEnded => Vec::new(),
        };
        Some(events)
    }

    fn skips_input(&self) -> bool {
        matches!(self.naming, Naming::Client { .. })
    }

    fn start_run(&mut self, p: payloads::TurnStarted) -> AgUiEvent {
        let (thread_id, run_id) = match &self.naming {
            Naming::Journal => (
                self.session.to_string(),
                format!("{}:{}", self.session, p.turn),
            ),
            Naming::Client { thread_id, run_id } => (thread_id.clone(), run_id.clone()),
        };
        self.run = Some(Run {
            thread_id: thread_id.clone(),
            run_id: run_id.clone(),
            input_next: matches!(p.reason, StartReason::Input),
        });
        self.skipping = None;
        AgUiEvent::RunStarted(RunStarted {
            thread_id,
            run_id,
            metadata: HostMetadata {
                session_id: Some(self.session),
                turn: Some(p.turn),
                reason: Some(p.reason),
                ..HostMetadata::default()
            }
            .wrap(),
        })
    }
}

impl Metadata {
    fn of(agenthost: HostMetadata) -> Metadata {
        Metadata { agenthost }
    }
}

/// `Interrupt.responseSchema`: what a `resume` entry's payload takes.
pub(super) fn response_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "approver": {"type": "string", "minLength": 1, "maxLength": 200},
            "arguments": {"description": "approve with these arguments instead (checked against the tool's JSON Schema)"},
            "message": {"type": "string", "minLength": 1, "maxLength": 4096},
            "result": {"description": "approve by answering in place of the tool, which does not run"}
        },
        "required": ["approved"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::payloads::{ToolStatus, TurnErrorKind};
    use crate::journal::{NewEvent, Payload, encode_record};

    fn stored<P: Payload>(session: Uuid, seq: u64, payload: &P) -> StoredEvent {
        let id = Uuid::now_v7();
        let (_, json) = encode_record(
            id,
            seq,
            session,
            &NewEvent::of(payload),
            "2025-01-01T00:00:00Z",
        );
        StoredEvent { id, seq, json }
    }

    fn types(events: &[AgUiEvent]) -> Vec<String> {
        events
            .iter()
            .map(|e| {
                serde_json::to_value(e).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    /// A turn with a user message, a reply, a tool call and its result,
    /// then one suspended on a gated call: the AG-UI events of each, for
    /// the events endpoint and for a POST response.
    #[test]
    fn a_turn_maps_to_a_run() {
        let s = Uuid::now_v7();
        let user = "msg_u".to_string();
        let reply = "msg_a".to_string();
        let journal = vec![
            stored(
                s,
                0,
                &payloads::SessionCreated {
                    app_id: Uuid::now_v7(),
                    app: "a".into(),
                    route: "/r".into(),
                    deployment_id: Uuid::now_v7(),
                    deployment_version: 1,
                    input: json!("hi"),
                    end_user: None,
                },
            ),
            stored(
                s,
                1,
                &payloads::TurnStarted {
                    turn: 1,
                    reason: StartReason::Input,
                    input: json!("hi"),
                },
            ),
            stored(
                s,
                2,
                &payloads::MessageStart {
                    message_id: user.clone(),
                    role: Role::User,
                },
            ),
            stored(
                s,
                3,
                &payloads::MessageDelta {
                    message_id: user.clone(),
                    delta: Delta::Text { text: "hi".into() },
                },
            ),
            stored(
                s,
                4,
                &payloads::MessageEnd {
                    message_id: user.clone(),
                    role: Role::User,
                    text: "hi".into(),
                    incomplete: None,
                },
            ),
            stored(
                s,
                5,
                &payloads::ToolCall {
                    tool_call_id: "c1".into(),
                    name: "add".into(),
                    arguments: json!({"n": 1}),
                    mcp_server: None,
                },
            ),
            stored(
                s,
                6,
                &payloads::ToolResult {
                    tool_call_id: "c1".into(),
                    name: "add".into(),
                    status: ToolStatus::Ok,
                    output: json!({"sum": 1}),
                },
            ),
            stored(
                s,
                7,
                &payloads::MessageStart {
                    message_id: reply.clone(),
                    role: Role::Assistant,
                },
            ),
            stored(
                s,
                8,
                &payloads::MessageDelta {
                    message_id: reply.clone(),
                    delta: Delta::Text { text: "one".into() },
                },
            ),
            stored(
                s,
                9,
                &payloads::MessageEnd {
                    message_id: reply.clone(),
                    role: Role::Assistant,
                    text: "one".into(),
                    incomplete: None,
                },
            ),
            stored(s, 10, &payloads::TurnEnded { turn: 1 }),
            stored(
                s,
                11,
                &payloads::TurnStarted {
                    turn: 2,
                    reason: StartReason::Input,
                    input: json!({"n": 2}),
                },
            ),
            stored(
                s,
                12,
                &payloads::ToolCall {
                    tool_call_id: "c2".into(),
                    name: "rm".into(),
                    arguments: json!({}),
                    mcp_server: None,
                },
            ),
            stored(
                s,
                13,
                &payloads::ToolApprovalRequired {
                    tool_call_id: "c2".into(),
                    name: "rm".into(),
                    arguments: json!({}),
                    reason: None,
                    gated_by: vec!["code".into()],
                    expires_at: None,
                },
            ),
        ];
        let mut mapper = Mapper::journal(s);
        let all: Vec<AgUiEvent> = journal.iter().flat_map(|e| mapper.map(e)).collect();
        assert_eq!(
            types(&all),
            [
                "RUN_STARTED",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "TOOL_CALL_START",
                "TOOL_CALL_ARGS",
                "TOOL_CALL_END",
                "TOOL_CALL_RESULT",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "RUN_FINISHED",
                "RUN_STARTED",
                "TOOL_CALL_START",
                "TOOL_CALL_ARGS",
                "TOOL_CALL_END",
                "RUN_FINISHED",
            ]
        );
        let run = format!("{s}:1");
        let first = serde_json::to_value(&all[0]).unwrap();
        assert_eq!(first["threadId"], json!(s.to_string()));
        assert_eq!(first["runId"], json!(run));
        assert_eq!(first["metadata"]["agenthost"]["turn"], json!(1));
        let result = serde_json::to_value(&all[7]).unwrap();
        assert_eq!(result["content"], json!("{\"sum\":1}"));
        assert_eq!(result["metadata"]["agenthost"]["status"], json!("ok"));
        let finished = serde_json::to_value(&all[11]).unwrap();
        assert_eq!(finished["outcome"], json!({"type": "success"}));
        let interrupted = serde_json::to_value(&all[16]).unwrap();
        assert_eq!(interrupted["outcome"]["type"], json!("interrupt"));
        let interrupt = &interrupted["outcome"]["interrupts"][0];
        assert_eq!(interrupt["id"], json!(journal[13].id.to_string()));
        assert_eq!(interrupt["toolCallId"], json!("c2"));
        assert_eq!(interrupt["reason"], json!("tool_call"));

        // A POST response: the client's names, and no user message.
        let mut mapper = Mapper::client(s, "t".into(), "r".into());
        let run1: Vec<AgUiEvent> = journal[1..=10].iter().flat_map(|e| mapper.map(e)).collect();
        assert_eq!(types(&run1)[..2], ["RUN_STARTED", "TOOL_CALL_START"]);
        assert_eq!(run1.len(), 9);
        let last = serde_json::to_value(run1.last().unwrap()).unwrap();
        assert_eq!(
            (last["threadId"].clone(), last["runId"].clone()),
            (json!("t"), json!("r"))
        );
    }

    #[test]
    fn a_failed_turn_is_a_run_error() {
        let s = Uuid::now_v7();
        let mut mapper = Mapper::journal(s);
        mapper.map(&stored(
            s,
            1,
            &payloads::TurnStarted {
                turn: 1,
                reason: StartReason::Input,
                input: Value::Null,
            },
        ));
        let out = mapper.map(&stored(
            s,
            2,
            &payloads::TurnError {
                turn: 1,
                kind: TurnErrorKind::Deadline,
                message: "late".into(),
            },
        ));
        let error = serde_json::to_value(&out[0]).unwrap();
        assert_eq!(error["type"], json!("RUN_ERROR"));
        assert_eq!(error["code"], json!("deadline"));
        // Nothing maps outside a run.
        assert!(
            mapper
                .map(&stored(s, 3, &payloads::SessionEnded::default()))
                .is_empty()
        );
    }
}
