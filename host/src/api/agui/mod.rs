//! AG-UI (docs/ag-ui.md): `POST /ag-ui/{app}/{route}`, where an AG-UI
//! client runs an agent on a thread (`run.rs`), and the AG-UI form of the
//! events endpoint (`GET /sessions/{id}/events?format=ag-ui`, served by
//! `api::events` with the framing here).
//!
//! The mapping from the journal (`mapping.rs`) and the wire types
//! (`protocol.rs`) know nothing of HTTP. Here, each journal event's AG-UI
//! events become SSE frames whose ids resume exactly: the last frame of a
//! journal event carries the event's own id, the ones before it
//! `<event id>:<n>` (n from 0), so a `Last-Event-ID` names a point between
//! any two frames.

mod mapping;
pub(super) mod protocol;
mod run;

use axum::response::sse::Event;
use uuid::Uuid;

pub(crate) use mapping::Mapper;
pub(crate) use protocol::{AgUiEvent, RunAgentInput};
pub(crate) use run::run;

use super::{ApiError, AppState};
use crate::journal::{EventType, StoredEvent};

/// Journal events read per step of the search for a turn's start.
const SCAN_CHUNK: usize = 256;

/// How far a client got: the frames of the event at `seq` it has, all of
/// them (`delivered: None`) or the first `n + 1` (`Some(n)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Position {
    pub seq: u64,
    pub delivered: Option<usize>,
}

impl Position {
    /// The first seq with frames the client does not have.
    pub(super) fn next_seq(self) -> u64 {
        match self.delivered {
            None => self.seq + 1,
            Some(_) => self.seq,
        }
    }

    /// Whether the client has frame `index` of the event at `seq`.
    fn has(self, seq: u64, index: usize) -> bool {
        seq < self.seq || (seq == self.seq && self.delivered.is_none_or(|n| index <= n))
    }
}

/// Splits an AG-UI frame id into its event id and frame number.
pub(super) fn parse_frame_id(raw: &str) -> Option<(Uuid, Option<usize>)> {
    let (event, index) = match raw.split_once(':') {
        Some((event, index)) => (event, Some(index.parse().ok()?)),
        None => (raw, None),
    };
    Some((Uuid::parse_str(event).ok()?, index))
}

/// The SSE frames of one journal event's AG-UI events, numbered, without
/// those the client already has (`after`).
pub(super) fn frames(
    event: &StoredEvent,
    mapped: Vec<AgUiEvent>,
    after: Option<Position>,
) -> Vec<Event> {
    let last = mapped.len().saturating_sub(1);
    mapped
        .into_iter()
        .enumerate()
        .filter(|(index, _)| !after.is_some_and(|p| p.has(event.seq, *index)))
        .map(|(index, agui)| {
            let id = if index == last {
                event.id.to_string()
            } else {
                format!("{}:{index}", event.id)
            };
            frame(&agui).id(id)
        })
        .collect()
}

/// One AG-UI event as an SSE frame (without an id).
pub(super) fn frame(event: &AgUiEvent) -> Event {
    // The AG-UI types serialize infallibly (string keys, no custom code).
    let json = serde_json::to_string(event).unwrap_or_default();
    Event::default().data(json)
}

/// The seq of the `TURN_STARTED` of the turn the event at `seq` belongs
/// to, or 0 when it is in none: where mapping must begin to resume there.
/// Reads back from `seq` a chunk at a time, so its cost is that of a turn.
pub(super) async fn turn_start(state: &AppState, session: Uuid, seq: u64) -> Result<u64, ApiError> {
    let mut end = seq + 1;
    loop {
        let begin = end.saturating_sub(SCAN_CHUNK as u64);
        let limit = (end - begin) as usize;
        let chunk = state
            .store
            .read(move |s| s.events(session, begin, limit))
            .await?;
        if let Some(start) = (chunk.iter().rev()).find(|e| e.is(EventType::TurnStarted)) {
            return Ok(start.seq);
        }
        if begin == 0 {
            return Ok(0);
        }
        end = begin;
    }
}

/// The framing of the events endpoint's AG-UI form: every journal event
/// from `start` is mapped (a resumed stream maps its turn again from its
/// start, to name the run), and only frames after `after` are sent.
pub(super) fn journal_framer(
    session: Uuid,
    after: Option<Position>,
) -> impl FnMut(&StoredEvent) -> (Vec<Event>, bool) + Send + 'static {
    let mut mapper = Mapper::journal(session);
    move |event: &StoredEvent| {
        let mapped = mapper.map(event);
        let end = event.is(EventType::SessionEnded);
        (frames(event, mapped, after), end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_ids_name_a_point_between_any_two_frames() {
        let id = Uuid::now_v7();
        assert_eq!(parse_frame_id(&id.to_string()), Some((id, None)));
        assert_eq!(parse_frame_id(&format!("{id}:1")), Some((id, Some(1))));
        assert_eq!(parse_frame_id(&format!("{id}:x")), None);
        assert_eq!(parse_frame_id("nope"), None);
        let at = Position {
            seq: 5,
            delivered: Some(0),
        };
        assert!(at.has(4, 2) && at.has(5, 0));
        assert!(!at.has(5, 1) && !at.has(6, 0));
        assert_eq!(at.next_seq(), 5);
        let all = Position {
            seq: 5,
            delivered: None,
        };
        assert!(all.has(5, 2) && !all.has(6, 0));
        assert_eq!(all.next_seq(), 6);
    }
}
