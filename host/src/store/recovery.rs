//! Closing a turn the runner could not close itself (the process died, or a
//! write of the turn failed): its open messages get a MESSAGE_END marked
//! `incomplete`, rebuilt from what the journal committed, then TURN_ERROR.

use redb::ReadableTable;
use serde_json::{Value, json};
use uuid::Uuid;

use super::StoreError;
use super::error::storage;
use crate::journal::{EventType, NewEvent, decode_record};

use super::batch::EventsTable as Events;

/// Takes secret values out of a text the journal rebuilt (see `Writer`).
pub type Redact = std::sync::Arc<dyn Fn(&str) -> String + Send + Sync>;

/// The events that close `turn` of `session` with TURN_ERROR `kind`. A
/// message's text is rebuilt from its committed deltas and passed through
/// `redact`: a secret split across two deltas was redacted in neither.
pub fn closing_events(
    events_table: &Events<'_>,
    session: Uuid,
    turn: u32,
    kind: &str,
    message: &str,
    redact: Option<&Redact>,
) -> Result<Vec<NewEvent>, StoreError> {
    let mut events: Vec<NewEvent> = open_messages(events_table, session)?
        .into_iter()
        .map(|(id, role, text)| {
            let text = redact.map_or(text.clone(), |redact| redact(&text));
            NewEvent::new(
                EventType::MessageEnd,
                json!({"message_id": id, "role": role, "text": text, "incomplete": true}),
            )
        })
        .collect();
    events.push(NewEvent::new(
        EventType::TurnError,
        json!({"turn": turn, "kind": kind, "message": message}),
    ));
    Ok(events)
}

/// Messages of the session's last turn that were started and never ended,
/// with their committed text, in the order they were started.
fn open_messages(
    table: &Events<'_>,
    session: Uuid,
) -> Result<Vec<(String, String, String)>, StoreError> {
    let key = session.as_u128();
    let mut ended: Vec<String> = Vec::new();
    let mut texts: Vec<(String, String)> = Vec::new();
    let mut open: Vec<(String, String, String)> = Vec::new();
    // Backwards from the newest event to the turn's TURN_STARTED.
    for row in table
        .range((key, 0)..=(key, u64::MAX))
        .map_err(storage)?
        .rev()
    {
        let (k, v) = row.map_err(storage)?;
        let Some(event) = decode_record(k.value().1, v.value()) else {
            continue;
        };
        let kind = event.event_type().to_string();
        if kind == "TURN_STARTED" {
            break;
        }
        let Ok(envelope) = serde_json::from_str::<Value>(&event.json) else {
            continue;
        };
        let payload = &envelope["payload"];
        let Some(id) = payload["message_id"].as_str() else {
            continue;
        };
        match kind.as_str() {
            "MESSAGE_END" => ended.push(id.to_string()),
            "MESSAGE_DELTA" if !ended.iter().any(|e| e == id) => {
                let text = payload["delta"]["text"].as_str().unwrap_or_default();
                texts.push((id.to_string(), text.to_string()));
            }
            "MESSAGE_START" if !ended.iter().any(|e| e == id) => {
                // Deltas were collected newest first.
                let text: String = texts
                    .iter()
                    .rev()
                    .filter(|(m, _)| m == id)
                    .map(|(_, t)| t.as_str())
                    .collect();
                let role = payload["role"].as_str().unwrap_or("assistant").to_string();
                open.push((id.to_string(), role, text));
            }
            _ => {}
        }
    }
    open.reverse();
    Ok(open)
}

/// The input of the session's last turn if that turn left no trace: after
/// its TURN_STARTED only the host's own user message was journaled. Such a
/// turn had no effect (a guest's only effects are journaled host calls), so
/// it can run again. `None` when the turn did something.
pub fn untouched_turn_input(
    table: &Events<'_>,
    session: Uuid,
) -> Result<Option<Value>, StoreError> {
    let key = session.as_u128();
    let mut user_message: Option<String> = None;
    let mut after_start: Vec<Value> = Vec::new();
    for row in table
        .range((key, 0)..=(key, u64::MAX))
        .map_err(storage)?
        .rev()
    {
        let (k, v) = row.map_err(storage)?;
        let event = decode_record(k.value().1, v.value()).ok_or_else(|| {
            super::error::corrupt(format!("event {session}/{} is unreadable", k.value().1))
        })?;
        let envelope: Value = serde_json::from_str(&event.json).map_err(super::error::corrupt)?;
        if event.event_type() == "TURN_STARTED" {
            let untouched = after_start.iter().all(|e| {
                let payload = &e["payload"];
                match e["type"].as_str() {
                    Some("MESSAGE_START") if payload["role"] == "user" => {
                        user_message = payload["message_id"].as_str().map(String::from);
                        true
                    }
                    Some("MESSAGE_DELTA" | "MESSAGE_END") => {
                        user_message.is_some()
                            && payload["message_id"].as_str() == user_message.as_deref()
                    }
                    _ => false,
                }
            });
            return Ok(untouched.then(|| envelope["payload"]["input"].clone()));
        }
        // Collected newest first; checked oldest first.
        after_start.insert(0, envelope);
        if after_start.len() > 3 {
            return Ok(None);
        }
    }
    Ok(None)
}
