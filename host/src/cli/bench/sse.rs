//! A minimal Server-Sent Events reader over a reqwest response: frames of
//! `data:` lines (the envelope carries the id), comments skipped.

use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::journal::payloads::TurnError;

/// A stream silent this long is dead (the server sends a keep-alive every 15 s).
const SILENCE: Duration = Duration::from_secs(120);

/// The envelope fields the bench uses; the payload is kept unparsed.
#[derive(Deserialize)]
pub(super) struct Event {
    pub id: String,
    pub seq: u64,
    #[serde(rename = "type")]
    pub kind: String,
    pub payload: Box<RawValue>,
}

impl Event {
    /// `kind: message` of a `TURN_ERROR`, for error messages.
    pub(super) fn failure(&self) -> String {
        match serde_json::from_str::<TurnError>(self.payload.get()) {
            Ok(error) => format!("{}: {}", error.kind.as_str(), error.message),
            Err(_) => format!("(an unreadable {} payload)", self.kind),
        }
    }
}

/// One open event stream.
pub(super) struct EventStream {
    response: reqwest::Response,
    frames: Frames,
    session: String,
    ended: bool,
}

impl EventStream {
    pub(super) fn new(response: reqwest::Response, session: &str) -> EventStream {
        EventStream {
            response,
            frames: Frames::default(),
            session: session.to_string(),
            ended: false,
        }
    }

    /// The next event, or `None` when the server closed the stream.
    pub(super) async fn next(&mut self) -> anyhow::Result<Option<Event>> {
        loop {
            if let Some(data) = self.frames.next_data() {
                let event = serde_json::from_slice(&data).with_context(|| {
                    format!(
                        "session {}: an event is not an envelope: {}",
                        self.session,
                        String::from_utf8_lossy(&data[..data.len().min(300)])
                    )
                })?;
                return Ok(Some(event));
            }
            if self.ended {
                return Ok(None);
            }
            let chunk = tokio::time::timeout(SILENCE, self.response.chunk()).await;
            match chunk {
                Err(_) => bail!(
                    "session {}: no event for {} s on the stream",
                    self.session,
                    SILENCE.as_secs()
                ),
                Ok(Err(err)) => bail!("session {}: the stream broke: {err}", self.session),
                Ok(Ok(None)) => self.ended = true,
                Ok(Ok(Some(bytes))) => self.frames.push(&bytes),
            }
        }
    }

    /// The next event; the stream's end is an error naming what was awaited.
    pub(super) async fn expect(&mut self, awaited: &str) -> anyhow::Result<Event> {
        match self.next().await? {
            Some(event) => Ok(event),
            None => bail!(
                "session {}: the event stream ended before {awaited}",
                self.session
            ),
        }
    }
}

/// The SSE framing: bytes in, the `data` of each complete frame out.
#[derive(Default)]
struct Frames {
    buffer: Vec<u8>,
    /// Where the unread part of `buffer` starts.
    start: usize,
    /// The `data` lines of the frame being read.
    data: Vec<u8>,
    has_data: bool,
}

impl Frames {
    fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        self.buffer.extend_from_slice(bytes);
    }

    /// The data of the next complete frame that has some.
    fn next_data(&mut self) -> Option<Vec<u8>> {
        while let Some(offset) = self.buffer[self.start..].iter().position(|&b| b == b'\n') {
            let end = self.start + offset;
            let mut line = &self.buffer[self.start..end];
            self.start = end + 1;
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            if line.is_empty() {
                if self.has_data {
                    self.has_data = false;
                    return Some(std::mem::take(&mut self.data));
                }
                continue;
            }
            if let Some(value) = line.strip_prefix(b"data:") {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data
                    .extend_from_slice(value.strip_prefix(b" ").unwrap_or(value));
                self.has_data = true;
            }
            // `id:`, `event:`, `retry:` and `:` comments: the envelope says it all.
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::Frames;

    #[test]
    fn frames_split_anywhere_and_skip_comments() {
        let text =
            b": keep-alive\n\nid: 1\ndata: {\"a\":1}\n\nid: 2\r\ndata:{\"b\":\r\ndata: 2}\r\n\r\n";
        for split in 0..text.len() {
            let mut frames = Frames::default();
            let mut out = Vec::new();
            for part in [&text[..split], &text[split..]] {
                frames.push(part);
                while let Some(data) = frames.next_data() {
                    out.push(String::from_utf8(data).unwrap());
                }
            }
            assert_eq!(out, ["{\"a\":1}", "{\"b\":\n2}"], "split at {split}");
        }
    }
}
