//! The events that close a turn the writer closes itself (after a crash, a
//! cancel with no runner, or a turn's failed write): its open messages
//! ended from their committed deltas, redacted, then TURN_ERROR. A leaf of
//! the domain, used by the session state machine and by recovery alike.

use uuid::Uuid;

use crate::journal::payloads::{self, Role};
use crate::journal::{NewEvent, StoredEvent, TurnErrorKind};
use crate::store::StoreError;
use crate::store::batch::Batch;

/// The events that close `turn` of `session` with TURN_ERROR `kind`. A
/// message's text is rebuilt from its committed deltas and passed through
/// the writer's redactor: a secret split across two deltas was redacted in
/// neither.
pub(in crate::store) fn closing_events(
    batch: &mut Batch<'_>,
    session: Uuid,
    turn: u32,
    kind: TurnErrorKind,
    message: &str,
) -> Result<Vec<NewEvent>, StoreError> {
    let journal = batch.tx.last_turn_events(session)?;
    let redact = batch.state.redact.as_ref();
    let mut events: Vec<NewEvent> = open_messages(&journal)
        .into_iter()
        .map(|(message_id, role, text)| {
            let text = redact.map_or(text.clone(), |current| current().redact(&text).into_owned());
            NewEvent::of(&payloads::MessageEnd {
                message_id,
                role,
                text,
                incomplete: Some(true),
            })
        })
        .collect();
    events.push(NewEvent::of(&payloads::TurnError {
        turn,
        kind,
        message: message.to_string(),
    }));
    Ok(events)
}

/// Messages of the last turn (`journal`, from its TURN_STARTED on) that
/// were started and never ended, with their committed text, in the order
/// they were started.
fn open_messages(journal: &[StoredEvent]) -> Vec<(String, Role, String)> {
    let mut open: Vec<(String, Role, String)> = Vec::new();
    for event in journal {
        // An unreadable payload is left out, as before (the host wrote it).
        if let Ok(Some(start)) = event.payload::<payloads::MessageStart>() {
            open.push((start.message_id, start.role, String::new()));
        } else if let Ok(Some(delta)) = event.payload::<payloads::MessageDelta>() {
            if let Some(message) = open.iter_mut().find(|(m, _, _)| *m == delta.message_id) {
                let payloads::Delta::Text { text } = delta.delta;
                message.2.push_str(&text);
            }
        } else if let Ok(Some(end)) = event.payload::<payloads::MessageEnd>() {
            open.retain(|(m, _, _)| *m != end.message_id);
        }
    }
    open
}
