//! The session's event stream as the bench reads it: frames from the shared
//! reader (`agenthost-sse`, which the e2e tests read with too), each one's
//! data an event envelope.

use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::wire::TurnError;

/// A stream silent this long is dead (the server sends a keep-alive every 15 s).
const SILENCE: Duration = Duration::from_secs(120);

/// The envelope fields the bench uses; the payload is kept unparsed.
#[derive(Deserialize)]
pub(crate) struct Event {
    pub(crate) id: String,
    pub(crate) seq: u64,
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) payload: Box<RawValue>,
}

impl Event {
    /// `kind: message` of a `TURN_ERROR`, for error messages.
    pub(crate) fn failure(&self) -> String {
        match serde_json::from_str::<TurnError>(self.payload.get()) {
            Ok(error) => format!("{}: {}", error.kind, error.message),
            Err(_) => format!("(an unreadable {} payload)", self.kind),
        }
    }
}

/// One open event stream.
pub(crate) struct EventStream {
    frames: agenthost_sse::EventStream,
    session: String,
}

impl EventStream {
    pub(crate) fn new(response: reqwest::Response, session: &str) -> EventStream {
        EventStream {
            frames: agenthost_sse::EventStream::new(response),
            session: session.to_string(),
        }
    }

    /// The next event, or `None` when the server closed the stream.
    pub(crate) async fn next(&mut self) -> anyhow::Result<Option<Event>> {
        let frame = match self.frames.next_frame(SILENCE).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ok(None),
            Err(agenthost_sse::ReadError::Silent(_)) => bail!(
                "session {}: no event for {} s on the stream",
                self.session,
                SILENCE.as_secs()
            ),
            Err(agenthost_sse::ReadError::Broken(err)) => {
                bail!("session {}: the stream broke: {err}", self.session)
            }
        };
        let data = &frame.data;
        let event = serde_json::from_slice(data).with_context(|| {
            format!(
                "session {}: an event is not an envelope: {}",
                self.session,
                String::from_utf8_lossy(&data[..data.len().min(300)])
            )
        })?;
        Ok(Some(event))
    }

    /// The next event; the stream's end is an error naming what was awaited.
    pub(crate) async fn expect(&mut self, awaited: &str) -> anyhow::Result<Event> {
        match self.next().await? {
            Some(event) => Ok(event),
            None => bail!(
                "session {}: the event stream ended before {awaited}",
                self.session
            ),
        }
    }
}
