//! Event types, the envelope clients see, and the record format stored in redb.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

use super::payloads::Payload;

/// Every kind of journal event. The wire names are part of the public API
/// (docs/events.md); clients must ignore types they do not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventType {
    SessionCreated,
    TurnStarted,
    MessageStart,
    MessageDelta,
    MessageEnd,
    ToolCall,
    ToolResult,
    ToolApprovalRequired,
    ToolApprovalGranted,
    ToolApprovalDenied,
    TurnError,
    TurnEnded,
    SessionEnded,
    HttpRequest,
    HttpRequestDenied,
    HttpResponse,
    InputQueued,
    TurnScheduled,
    TurnScheduleCancelled,
    LlmCall,
    LlmResult,
    BudgetReached,
}

impl EventType {
    /// Every event type.
    pub const ALL: [EventType; 22] = [
        EventType::SessionCreated,
        EventType::TurnStarted,
        EventType::MessageStart,
        EventType::MessageDelta,
        EventType::MessageEnd,
        EventType::ToolCall,
        EventType::ToolResult,
        EventType::ToolApprovalRequired,
        EventType::ToolApprovalGranted,
        EventType::ToolApprovalDenied,
        EventType::TurnError,
        EventType::TurnEnded,
        EventType::SessionEnded,
        EventType::HttpRequest,
        EventType::HttpRequestDenied,
        EventType::HttpResponse,
        EventType::InputQueued,
        EventType::TurnScheduled,
        EventType::TurnScheduleCancelled,
        EventType::LlmCall,
        EventType::LlmResult,
        EventType::BudgetReached,
    ];

    /// The wire name, e.g. `MESSAGE_DELTA`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::SessionCreated => "SESSION_CREATED",
            EventType::TurnStarted => "TURN_STARTED",
            EventType::MessageStart => "MESSAGE_START",
            EventType::MessageDelta => "MESSAGE_DELTA",
            EventType::MessageEnd => "MESSAGE_END",
            EventType::ToolCall => "TOOL_CALL",
            EventType::ToolResult => "TOOL_RESULT",
            EventType::ToolApprovalRequired => "TOOL_APPROVAL_REQUIRED",
            EventType::ToolApprovalGranted => "TOOL_APPROVAL_GRANTED",
            EventType::ToolApprovalDenied => "TOOL_APPROVAL_DENIED",
            EventType::TurnError => "TURN_ERROR",
            EventType::TurnEnded => "TURN_ENDED",
            EventType::SessionEnded => "SESSION_ENDED",
            EventType::HttpRequest => "HTTP_REQUEST",
            EventType::HttpRequestDenied => "HTTP_REQUEST_DENIED",
            EventType::HttpResponse => "HTTP_RESPONSE",
            EventType::InputQueued => "INPUT_QUEUED",
            EventType::TurnScheduled => "TURN_SCHEDULED",
            EventType::TurnScheduleCancelled => "TURN_SCHEDULE_CANCELLED",
            EventType::LlmCall => "LLM_CALL",
            EventType::LlmResult => "LLM_RESULT",
            EventType::BudgetReached => "BUDGET_REACHED",
        }
    }

    /// The type of a wire name; `None` for a name this version does not know.
    pub(crate) fn from_wire(name: &str) -> Option<EventType> {
        EventType::ALL
            .into_iter()
            .find(|kind| kind.as_str() == name)
    }
}

/// An event before the writer has given it an id, a seq and a timestamp.
///
/// The payload is serialized when the event is made, on the thread that
/// makes it (a turn's, a request's), so the single writer thread only frames
/// it into the envelope.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub event_type: EventType,
    pub payload: Box<RawValue>,
}

impl NewEvent {
    /// The event of `payload`, under the one type its type is bound to.
    pub fn of<P: Payload>(payload: &P) -> Self {
        // The payload types serialize infallibly (string keys, no custom code).
        let payload =
            serde_json::value::to_raw_value(payload).unwrap_or_else(|_| RawValue::NULL.to_owned());
        NewEvent {
            event_type: P::TYPE,
            payload,
        }
    }

    /// An event of any type and payload: only tests write such events.
    #[cfg(test)]
    pub fn untyped(event_type: EventType, payload: serde_json::Value) -> Self {
        let payload =
            serde_json::value::to_raw_value(&payload).unwrap_or_else(|_| RawValue::NULL.to_owned());
        NewEvent {
            event_type,
            payload,
        }
    }
}

/// A committed event, cheap to clone and fan out to streams.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub id: Uuid,
    pub seq: u64,
    /// The full envelope as JSON text, exactly as clients receive it.
    pub json: Arc<str>,
}

impl StoredEvent {
    /// The envelope's `type`, read without parsing: the envelope's fields are
    /// serialized in a fixed order (id, seq, session_id, type), so the first
    /// `"type":"` is the envelope's own and never one inside the payload.
    pub fn event_type(&self) -> &str {
        const KEY: &str = "\"type\":\"";
        let Some(start) = self.json.find(KEY).map(|i| i + KEY.len()) else {
            return "";
        };
        let rest = &self.json[start..];
        rest.find('"').map_or("", |end| &rest[..end])
    }

    /// The event's type; `None` for a type this version does not know.
    pub(crate) fn kind(&self) -> Option<EventType> {
        EventType::from_wire(self.event_type())
    }

    /// Whether the event is of `kind` (no search over the types).
    pub(crate) fn is(&self, kind: EventType) -> bool {
        self.event_type() == kind.as_str()
    }

    /// The event's payload read as `P`, the one type of payload its event
    /// type is written with (`NewEvent::of`): `Ok(None)` when the event is of
    /// another type, an error when its payload does not read as `P`. The
    /// read side of `NewEvent::of`: readers never match type names or index
    /// `["payload"]` by hand.
    pub(crate) fn payload<P: Payload + DeserializeOwned>(&self) -> serde_json::Result<Option<P>> {
        if !self.is(P::TYPE) {
            return Ok(None);
        }
        #[derive(Deserialize)]
        struct Envelope<P> {
            payload: P,
        }
        let envelope: Envelope<P> = serde_json::from_str(&self.json)?;
        Ok(Some(envelope.payload))
    }

    /// When the event was committed (the envelope's `created_at`, RFC 3339).
    pub(crate) fn created_at(&self) -> serde_json::Result<String> {
        #[derive(Deserialize)]
        struct Envelope {
            created_at: String,
        }
        let envelope: Envelope = serde_json::from_str(&self.json)?;
        Ok(envelope.created_at)
    }

    /// The payload as plain JSON, for readers that pass it on whatever its
    /// type (AG-UI's custom events).
    pub(crate) fn payload_value(&self) -> serde_json::Result<serde_json::Value> {
        #[derive(Deserialize)]
        struct Envelope {
            payload: serde_json::Value,
        }
        let envelope: Envelope = serde_json::from_str(&self.json)?;
        Ok(envelope.payload)
    }
}

/// Version tag of the stored record format.
const RECORD_V1: u8 = 1;

/// Builds the stored record of an event: `[1u8][16-byte event id][envelope JSON]`.
/// Returns the record and the envelope JSON (`StoredEvent::json`).
///
/// The envelope is `{"id","seq","session_id","type","payload","created_at"}`
/// in that order (`StoredEvent::event_type` relies on it), written by hand:
/// the payload is already JSON (`NewEvent::of`), and this runs on the single
/// writer thread for every event.
pub fn encode_record(
    id: Uuid,
    seq: u64,
    session_id: Uuid,
    event: &NewEvent,
    created_at: &str,
) -> (Vec<u8>, Arc<str>) {
    let payload = event.payload.get();
    let mut record = Vec::with_capacity(17 + 160 + payload.len() + created_at.len());
    record.push(RECORD_V1);
    record.extend_from_slice(id.as_bytes());
    let mut uuid = Uuid::encode_buffer();
    record.extend_from_slice(b"{\"id\":\"");
    record.extend_from_slice(id.hyphenated().encode_lower(&mut uuid).as_bytes());
    record.extend_from_slice(b"\",\"seq\":");
    record.extend_from_slice(itoa::Buffer::new().format(seq).as_bytes());
    record.extend_from_slice(b",\"session_id\":\"");
    record.extend_from_slice(session_id.hyphenated().encode_lower(&mut uuid).as_bytes());
    record.extend_from_slice(b"\",\"type\":\"");
    record.extend_from_slice(event.event_type.as_str().as_bytes());
    record.extend_from_slice(b"\",\"payload\":");
    record.extend_from_slice(payload.as_bytes());
    record.extend_from_slice(b",\"created_at\":");
    // A `&str` always serializes; escaped in case a caller passes quotes.
    let _ = serde_json::to_writer(&mut record, created_at);
    record.push(b'}');
    // Every piece above is UTF-8, so the lossy path never runs; the strict
    // check is the fast one (word at a time over ASCII).
    let json: Arc<str> = match std::str::from_utf8(&record[17..]) {
        Ok(json) => Arc::from(json),
        Err(_) => Arc::from(String::from_utf8_lossy(&record[17..]).as_ref()),
    };
    (record, json)
}

/// The id of a stored record, without decoding the rest.
pub(crate) fn record_id(bytes: &[u8]) -> Option<Uuid> {
    match bytes.split_first() {
        Some((&RECORD_V1, rest)) => Uuid::from_slice(rest.get(..16)?).ok(),
        _ => None,
    }
}

/// Reads a stored record back. `None` for a record this version cannot read
/// (which would be a bug or a newer format: never silently skipped by callers).
pub fn decode_record(seq: u64, bytes: &[u8]) -> Option<StoredEvent> {
    let (&version, rest) = bytes.split_first()?;
    if version != RECORD_V1 || rest.len() < 16 {
        return None;
    }
    let (id, json) = rest.split_at(16);
    let id = Uuid::from_slice(id).ok()?;
    let json = std::str::from_utf8(json).ok()?;
    Some(StoredEvent {
        id,
        seq,
        json: Arc::from(json),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn record_round_trips_and_envelope_has_every_field() {
        let id = Uuid::now_v7();
        let session = Uuid::now_v7();
        let event = NewEvent::untyped(
            EventType::MessageDelta,
            json!({"message_id": "m1", "delta": {"type": "text", "text": "hi"}}),
        );
        let (record, json) = encode_record(id, 7, session, &event, "2026-11-22T10:00:00.000Z");
        let back = decode_record(7, &record).unwrap();
        assert_eq!(back.id, id);
        assert_eq!(back.json, json);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["id"], id.to_string());
        assert_eq!(v["seq"], 7);
        assert_eq!(v["session_id"], session.to_string());
        assert_eq!(v["type"], "MESSAGE_DELTA");
        assert_eq!(v["payload"]["delta"]["text"], "hi");
        assert_eq!(v["created_at"], "2026-11-22T10:00:00.000Z");
    }

    fn stored(event: &NewEvent) -> StoredEvent {
        let (_, json) = encode_record(Uuid::nil(), 3, Uuid::nil(), event, "t");
        StoredEvent {
            id: Uuid::nil(),
            seq: 3,
            json,
        }
    }

    /// The read side of `NewEvent::of`: an event reads back as the payload
    /// type of its event type and as no other.
    #[test]
    fn a_stored_event_reads_back_as_its_own_payload_type_only() {
        use crate::journal::payloads::{TurnEnded, TurnError};
        let event = stored(&NewEvent::of(&TurnEnded { turn: 2 }));
        assert_eq!(event.kind(), Some(EventType::TurnEnded));
        assert!(event.is(EventType::TurnEnded) && !event.is(EventType::TurnError));
        assert_eq!(
            event.payload::<TurnEnded>().unwrap(),
            Some(TurnEnded { turn: 2 })
        );
        assert_eq!(event.payload::<TurnError>().unwrap(), None);
        assert_eq!(event.payload_value().unwrap(), json!({"turn": 2}));
        // Its type's name, but not its type's payload: an error, not a guess.
        let wrong = stored(&NewEvent::untyped(
            EventType::TurnEnded,
            json!({"turn": "two"}),
        ));
        assert!(wrong.payload::<TurnEnded>().is_err());
        for kind in EventType::ALL {
            assert_eq!(EventType::from_wire(kind.as_str()), Some(kind));
        }
        assert_eq!(EventType::from_wire("TURN_DANCED"), None);
    }

    #[test]
    fn event_type_is_the_envelopes_own_even_when_the_payload_mimics_it() {
        let event = NewEvent::untyped(
            EventType::TurnStarted,
            json!({"input": {"type": "SESSION_ENDED"}, "type": "SESSION_ENDED"}),
        );
        let (record, _) = encode_record(
            Uuid::now_v7(),
            1,
            Uuid::now_v7(),
            &event,
            "2026-11-22T10:00:00.000Z",
        );
        assert_eq!(
            decode_record(1, &record).unwrap().event_type(),
            "TURN_STARTED"
        );
    }

    /// The hand-written envelope is byte for byte what serde writes for the
    /// same fields (the stored format must not drift).
    #[test]
    fn envelope_matches_serde_field_for_field() {
        #[derive(Serialize)]
        struct EnvelopeOut<'a> {
            id: Uuid,
            seq: u64,
            session_id: Uuid,
            #[serde(rename = "type")]
            event_type: EventType,
            payload: &'a RawValue,
            created_at: &'a str,
        }
        let (id, session) = (Uuid::now_v7(), Uuid::now_v7());
        let event = NewEvent::untyped(
            EventType::ToolCall,
            json!({"name": "a\"b", "arguments": {"x": [1, 2.5, null]}, "text": "é\n"}),
        );
        for created_at in ["2026-11-22T10:00:00.000Z", "odd \"quoted\" \\ time"] {
            let (_, json) = encode_record(id, u64::MAX, session, &event, created_at);
            let expected = serde_json::to_string(&EnvelopeOut {
                id,
                seq: u64::MAX,
                session_id: session,
                event_type: event.event_type,
                payload: &event.payload,
                created_at,
            })
            .unwrap();
            assert_eq!(&*json, expected);
        }
    }

    #[test]
    fn unknown_record_versions_are_refused() {
        assert!(decode_record(0, &[2u8; 20]).is_none());
        assert!(decode_record(0, &[]).is_none());
    }
}
