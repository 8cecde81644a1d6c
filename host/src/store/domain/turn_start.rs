//! The events that open a turn: its TURN_STARTED, then the input as a
//! user message when it is text (a new session's first turn, an input's,
//! a queued input's).

use serde_json::Value;
use uuid::Uuid;

use crate::journal::NewEvent;
use crate::journal::payloads::{self, Delta, Role, StartReason};

/// TURN_STARTED with `reason`, then the input as a user message when it is text.
pub(in crate::store) fn turn_start_events_for(
    turn: u32,
    input: &Value,
    reason: StartReason,
) -> Vec<NewEvent> {
    let mut events = vec![NewEvent::of(&payloads::TurnStarted {
        turn,
        reason,
        input: input.clone(),
    })];
    if let Some(text) = input_text(input) {
        let message_id = format!("msg_{}", Uuid::now_v7().simple());
        events.push(NewEvent::of(&payloads::MessageStart {
            message_id: message_id.clone(),
            role: Role::User,
        }));
        events.push(NewEvent::of(&payloads::MessageDelta {
            message_id: message_id.clone(),
            delta: Delta::Text { text: text.into() },
        }));
        events.push(NewEvent::of(&payloads::MessageEnd {
            message_id,
            role: Role::User,
            text: text.into(),
            incomplete: None,
        }));
    }
    events
}

/// The text of a text input: a JSON string, or an object's string field `text`.
pub(super) fn input_text(input: &Value) -> Option<&str> {
    match input {
        Value::String(text) => Some(text),
        Value::Object(map) => map.get("text").and_then(Value::as_str),
        _ => None,
    }
}
