//! The SDK's error types: what can go wrong in a turn, and how it reads in TURN_ERROR.

use std::fmt;

use crate::bindings::agenthost::agent::types as wit;
use crate::tools::ToolCall;

/// Why a turn (or one of its effects) failed.
///
/// Returning `Err` from [`Agent::handle`](crate::Agent::handle) ends the turn
/// with a TURN_ERROR carrying this error's [`Display`](fmt::Display) text,
/// except for [`Error::ToolApprovalRequired`], which ends it cleanly.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The host refused an effect (a message, a tool call, a history read...).
    Host(HostError),
    /// A gated tool call now waits for a human decision, so the turn is
    /// suspended. Propagate it with `?`: the SDK ends the turn without an
    /// error, and the agent resumes in a turn whose reason is the decision
    /// (where the SDK runs the step before `handle`: see
    /// [`Turn::resumed`](crate::Turn::resumed)).
    ToolApprovalRequired(ToolCall),
    /// The input (or a tool's arguments) is not what the agent expects.
    BadInput(String),
    /// An outbound HTTP request failed (see [`crate::http`]).
    Http(crate::http::HttpError),
    /// Calling the model failed (see [`crate::llm`]).
    Llm(crate::llm::LlmError),
    /// Anything else, with its message.
    Other(String),
}

/// An effect the host refused. The turn may go on, but usually should not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostError {
    /// The effect breaks the journal's order rules (for example a delta to a
    /// message that is not open).
    InvalidOrder(String),
    /// A size or count limit was reached.
    Limit(String),
    /// Nothing more can be written: the session has ended or the turn is suspended.
    Closed(String),
    /// The host could not record the effect (storage failure).
    Unavailable(String),
}

impl HostError {
    /// Converts the raw binding's error.
    pub(crate) fn from_wit(error: wit::HostError) -> Self {
        match error {
            wit::HostError::InvalidOrder(m) => HostError::InvalidOrder(m),
            wit::HostError::Limit(m) => HostError::Limit(m),
            wit::HostError::Closed(m) => HostError::Closed(m),
            wit::HostError::Unavailable(m) => HostError::Unavailable(m),
        }
    }
}

/// Maps a raw host result to the SDK's error.
pub(crate) fn host<T>(result: Result<T, wit::HostError>) -> Result<T, Error> {
    result.map_err(|e| Error::Host(HostError::from_wit(e)))
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::InvalidOrder(m) => write!(f, "invalid order: {m}"),
            HostError::Limit(m) => write!(f, "limit reached: {m}"),
            HostError::Closed(m) => write!(f, "closed: {m}"),
            HostError::Unavailable(m) => write!(f, "unavailable: {m}"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Host(e) => write!(f, "the host refused an effect: {e}"),
            Error::ToolApprovalRequired(call) => write!(
                f,
                "tool call {} ({}) waits for approval",
                call.id.as_deref().unwrap_or("?"),
                call.name
            ),
            Error::BadInput(m) => write!(f, "bad input: {m}"),
            Error::Http(e) => e.fmt(f),
            Error::Llm(e) => e.fmt(f),
            Error::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for HostError {}
impl std::error::Error for Error {}

impl From<HostError> for Error {
    fn from(e: HostError) -> Self {
        Error::Host(e)
    }
}

/// JSON that does not fit what the agent expects is bad input.
impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::BadInput(e.to_string())
    }
}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Error::Other(message)
    }
}

/// Lets tool handlers, which fail with a `String`, use `?` on the turn's effects.
impl From<Error> for String {
    fn from(e: Error) -> Self {
        e.to_string()
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Self {
        Error::Other(message.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_well_in_turn_error() {
        assert_eq!(Error::from("agent said no").to_string(), "agent said no");
        let e = Error::Host(HostError::Closed("session ended".into()));
        assert_eq!(
            e.to_string(),
            "the host refused an effect: closed: session ended"
        );
        let bad: Error = serde_json::from_str::<u32>("\"x\"").unwrap_err().into();
        assert!(matches!(bad, Error::BadInput(_)));
    }
}
