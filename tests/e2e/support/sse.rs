//! The event stream as the tests read it: frames from the shared reader
//! (`agenthost-sse`, crates/sse, which `agenthost bench` reads with too),
//! each one checked to be an envelope with its `id:` (or, for the approvals
//! feed, read as a `Frame` with its `event:` name).

use std::time::Duration;

use agenthost_sse::ReadError;
use serde_json::Value;

/// One frame as a test reads it: its `id:`, `event:` and `data:` (text).
#[derive(Debug, Default, Clone)]
pub struct Frame {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

impl Frame {
    /// The data as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).expect("data is JSON")
    }
}

/// What one read of a session stream found: an event, the stream's end
/// (the server closed it), nothing for the whole timeout, or a break (the
/// connection failed: the server died).
#[derive(Debug)]
pub enum Read {
    Event(Value),
    End,
    Silent,
    Broken(String),
}

pub struct EventStream {
    frames: agenthost_sse::EventStream,
    /// The stream ended or broke: nothing more is read.
    ended: bool,
}

impl EventStream {
    pub fn new(response: reqwest::Response) -> Self {
        EventStream {
            frames: agenthost_sse::EventStream::new(response),
            ended: false,
        }
    }

    /// The next frame within `timeout`, however many keep-alive comments
    /// arrive meanwhile (the server sends one every 15 s, and the reader's
    /// own silence counts bytes, so a wait longer than that would never end).
    async fn next_within(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<agenthost_sse::Frame>, ReadError> {
        match tokio::time::timeout(timeout, self.frames.next_frame(timeout)).await {
            Ok(read) => read,
            Err(_) => Err(ReadError::Silent(timeout)),
        }
    }

    /// The next frame, or `None` when the stream ends. Panics after
    /// `timeout` without one (a hang is a failure, not a wait).
    pub async fn frame(&mut self, timeout: Duration) -> Option<Frame> {
        if self.ended {
            return None;
        }
        let frame = match self.next_within(timeout).await {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                self.ended = true;
                return None;
            }
            Err(ReadError::Silent(_)) => panic!("no event within {timeout:?}"),
            Err(ReadError::Broken(err)) => panic!("chunk: {err}"),
        };
        Some(Frame {
            id: frame.id,
            event: frame.event,
            data: String::from_utf8(frame.data).expect("utf-8"),
        })
    }

    /// The next event envelope of a session stream, or `None` when the
    /// stream ends. Panics after `timeout` without one.
    pub async fn next(&mut self, timeout: Duration) -> Option<Value> {
        let frame = self.frame(timeout).await?;
        assert!(
            frame.event.is_none(),
            "frames must not carry an event: field"
        );
        let envelope = frame.json();
        assert_eq!(
            Some(envelope["id"].as_str().unwrap().to_string()),
            frame.id,
            "id: matches the envelope"
        );
        Some(envelope)
    }

    /// The next event, the end, silence for `timeout` or a break: each told
    /// apart, never a panic (for the crash tests, where a break is the kill).
    /// A frame that is not JSON reads as a break.
    pub async fn read(&mut self, timeout: Duration) -> Read {
        if self.ended {
            return Read::End;
        }
        match self.next_within(timeout).await {
            Ok(Some(frame)) => match serde_json::from_slice(&frame.data) {
                Ok(event) => Read::Event(event),
                Err(err) => {
                    self.ended = true;
                    Read::Broken(format!("a frame that is not JSON: {err}"))
                }
            },
            Ok(None) => {
                self.ended = true;
                Read::End
            }
            Err(ReadError::Silent(_)) => Read::Silent,
            Err(ReadError::Broken(err)) => {
                self.ended = true;
                Read::Broken(err.to_string())
            }
        }
    }

    /// Reads the events left until the server ends the stream, within
    /// `timeout` of each other; returns them. Panics if the stream goes
    /// silent (an open, idle stream is not an ended one) or breaks.
    pub async fn rest_until_end(&mut self, timeout: Duration) -> Vec<Value> {
        let mut rest = Vec::new();
        loop {
            match self.read(timeout).await {
                Read::Event(event) => rest.push(event),
                Read::End => return rest,
                Read::Silent => {
                    panic!("the stream stayed open and silent for {timeout:?} after {rest:#?}")
                }
                Read::Broken(err) => panic!("the stream broke instead of ending: {err}"),
            }
        }
    }

    /// Panics unless the server ends the stream within `timeout`, with no
    /// event before the end.
    pub async fn expect_end(&mut self, timeout: Duration) {
        let rest = self.rest_until_end(timeout).await;
        assert!(rest.is_empty(), "events before the end: {rest:#?}");
    }

    /// Panics unless the stream stays open and silent for `window`: no
    /// event, no end, no break.
    pub async fn expect_silence(&mut self, window: Duration) {
        match self.read(window).await {
            Read::Silent => {}
            other => panic!("expected silence for {window:?}, got {other:?}"),
        }
    }

    /// Reads until the event with `seq` (inclusive); returns all read.
    pub async fn until_seq(&mut self, seq: u64) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(event) = self.next(Duration::from_secs(60)).await {
            let done = event["seq"].as_u64() == Some(seq);
            out.push(event);
            if done {
                return out;
            }
        }
        panic!("stream ended before seq {seq}: {out:?}");
    }

    /// Reads until an event of one of `types` (inclusive); returns all read.
    pub async fn until(&mut self, types: &[&str]) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(event) = self.next(Duration::from_secs(60)).await {
            let done = types.contains(&event["type"].as_str().unwrap_or(""));
            out.push(event);
            if done {
                return out;
            }
        }
        panic!("stream ended before any of {types:?}: {out:?}");
    }
}

pub fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}
