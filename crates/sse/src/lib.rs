//! The one reader of agenthost's event stream (`GET /sessions/{id}/events`)
//! on the client side: `agenthost bench` (crates/bench) and the end-to-end
//! tests (tests/e2e/support/sse.rs) both read frames with it, and each
//! decodes the envelope in its own way.
//!
//! It follows the Server-Sent Events framing (the WHATWG HTML standard's
//! "event stream interpretation") as far as the server uses it: `id:`,
//! `event:` and `data:` fields, `:` comments, LF or CRLF line ends, a blank
//! line ending a frame. Frames without data (keep-alive comments) are
//! skipped. Reconnection is the caller's business.

use std::time::Duration;

/// One frame of the stream.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The `id:` field, if the frame has one.
    pub id: Option<String>,
    /// The `event:` field, if the frame has one (agenthost sends none).
    pub event: Option<String>,
    /// The `data:` lines, joined by `\n`.
    pub data: Vec<u8>,
}

/// Why a frame could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Nothing arrived for the given time.
    Silent(Duration),
    /// The response body failed (the connection broke, the server died).
    Broken(reqwest::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Silent(silence) => write!(f, "nothing on the stream for {silence:?}"),
            ReadError::Broken(err) => write!(f, "the stream broke: {err}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// An open event stream: an HTTP response read frame by frame.
pub struct EventStream {
    response: reqwest::Response,
    frames: Frames,
    ended: bool,
}

impl EventStream {
    pub fn new(response: reqwest::Response) -> EventStream {
        EventStream {
            response,
            frames: Frames::default(),
            ended: false,
        }
    }

    /// The next frame with data, or `None` once the server closed the
    /// stream; an error when no bytes at all arrive for `silence` (a
    /// keep-alive comment counts as bytes: to bound the wait for a frame,
    /// wrap the call in a timeout) or the body fails. Cancel-safe.
    pub async fn next_frame(&mut self, silence: Duration) -> Result<Option<Frame>, ReadError> {
        loop {
            if let Some(frame) = self.frames.next_frame() {
                return Ok(Some(frame));
            }
            if self.ended {
                return Ok(None);
            }
            match tokio::time::timeout(silence, self.response.chunk()).await {
                Err(_) => return Err(ReadError::Silent(silence)),
                Ok(Err(err)) => return Err(ReadError::Broken(err)),
                Ok(Ok(None)) => self.ended = true,
                Ok(Ok(Some(bytes))) => self.frames.push(&bytes),
            }
        }
    }

    /// Whether the server closed the stream (everything read is returned first).
    pub fn ended(&self) -> bool {
        self.ended
    }
}

/// The framing alone: bytes in, frames out, split anywhere.
#[derive(Default)]
pub struct Frames {
    buffer: Vec<u8>,
    /// Where the unread part of `buffer` starts.
    start: usize,
    /// The frame being read.
    frame: Frame,
    has_data: bool,
}

impl Frames {
    /// Adds bytes as they arrived.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        self.buffer.extend_from_slice(bytes);
    }

    /// The next complete frame that has data.
    pub fn next_frame(&mut self) -> Option<Frame> {
        while let Some(offset) = self.buffer[self.start..].iter().position(|&b| b == b'\n') {
            let end = self.start + offset;
            let mut line = &self.buffer[self.start..end];
            self.start = end + 1;
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            if line.is_empty() {
                let frame = std::mem::take(&mut self.frame);
                if std::mem::take(&mut self.has_data) {
                    return Some(frame);
                }
                continue;
            }
            let (field, value) = match line.iter().position(|&b| b == b':') {
                Some(0) => continue, // a comment
                Some(colon) => {
                    let value = &line[colon + 1..];
                    (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (line, &[][..]),
            };
            match field {
                b"data" => {
                    if self.has_data {
                        self.frame.data.push(b'\n');
                    }
                    self.frame.data.extend_from_slice(value);
                    self.has_data = true;
                }
                b"id" => self.frame.id = Some(String::from_utf8_lossy(value).into_owned()),
                b"event" => self.frame.event = Some(String::from_utf8_lossy(value).into_owned()),
                _ => {} // `retry:` and unknown fields
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::{Frame, Frames};

    #[test]
    fn frames_split_anywhere_and_skip_comments() {
        let text = b": keep-alive\n\nid: 1\ndata: {\"a\":1}\n\nid: 2\r\nevent: x\r\ndata:{\"b\":\r\ndata: 2}\r\n\r\n";
        let expected = [
            Frame {
                id: Some("1".into()),
                event: None,
                data: b"{\"a\":1}".to_vec(),
            },
            Frame {
                id: Some("2".into()),
                event: Some("x".into()),
                data: b"{\"b\":\n2}".to_vec(),
            },
        ];
        for split in 0..text.len() {
            let mut frames = Frames::default();
            let mut out = Vec::new();
            for part in [&text[..split], &text[split..]] {
                frames.push(part);
                while let Some(frame) = frames.next_frame() {
                    out.push(frame);
                }
            }
            assert_eq!(out, expected, "split at {split}");
        }
    }
}
