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

pub struct EventStream {
    frames: agenthost_sse::EventStream,
    /// The stream ended, broke or went silent (`try_next`): nothing more is read.
    ended: bool,
}

impl EventStream {
    pub fn new(response: reqwest::Response) -> Self {
        EventStream {
            frames: agenthost_sse::EventStream::new(response),
            ended: false,
        }
    }

    /// The next frame, or `None` when the stream ends. Panics after
    /// `timeout` without one (a hang is a failure, not a wait).
    pub async fn frame(&mut self, timeout: Duration) -> Option<Frame> {
        if self.ended {
            return None;
        }
        let frame = match self.frames.next_frame(timeout).await {
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

    /// The next event, or `None` when the stream ends, breaks (the server
    /// died) or stays silent for `timeout`. Never panics: for crash tests.
    pub async fn try_next(&mut self, timeout: Duration) -> Option<Value> {
        if self.ended {
            return None;
        }
        match self.frames.next_frame(timeout).await {
            Ok(Some(frame)) => serde_json::from_slice(&frame.data).ok(),
            Ok(None) | Err(_) => {
                self.ended = true;
                None
            }
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
