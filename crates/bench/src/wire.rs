//! The parts of the server's answers the bench reads. The server's own
//! types (`host/src/api/views.rs`, `host/src/journal/payloads.rs`) are not
//! used: the bench is an outside client, built without the server, and
//! `tests/e2e/bench.rs` runs it against the real one, so an answer that
//! changed shape fails there.

use serde::Deserialize;

/// `201` of `POST /sessions`.
#[derive(Deserialize)]
pub(crate) struct CreatedSession {
    pub session_id: String,
}

/// `GET /sessions/{id}`.
#[derive(Deserialize)]
pub(crate) struct SessionView {
    /// `running`, `idle`, `awaiting_approval`, `errored`, `ended`.
    pub status: String,
}

/// `GET /apps/{id}`.
#[derive(Deserialize)]
pub(crate) struct AppView {
    /// The current deployment's routes.
    pub routes: Vec<String>,
}

/// `202` of `POST /sessions/{id}/input` and `POST /sessions/{id}/approval`:
/// the turn is scheduled.
#[derive(Deserialize)]
pub(crate) struct Accepted {
    #[allow(dead_code)] // read to check the answer's shape
    pub turn: u32,
}

/// Every error response: `{"error": {"code", "message"}}`.
#[derive(Deserialize)]
pub(crate) struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Deserialize)]
pub(crate) struct ErrorDetail {
    pub message: String,
}

/// The payload of a `TURN_ERROR` event.
#[derive(Deserialize)]
pub(crate) struct TurnError {
    pub kind: String,
    pub message: String,
}
