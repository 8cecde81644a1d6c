//! A small SSE reader over a real HTTP response: frames of `id:`, `event:`
//! and `data:`.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

/// One SSE frame: its `id:`, `event:` and `data:` lines.
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
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
    pub ended: bool,
}

impl EventStream {
    pub fn new(response: reqwest::Response) -> Self {
        EventStream {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
            ended: false,
        }
    }

    /// The next frame with data, or `None` when the stream ends. Panics
    /// after `timeout` without one (a hang is a failure, not a wait).
    pub async fn frame(&mut self, timeout: Duration) -> Option<Frame> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let text: String = self.buffer.drain(..end + 2).collect();
                let mut frame = Frame::default();
                for line in text.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        frame.id = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        frame.event = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        frame.data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if frame.data.is_empty() {
                    continue; // a keep-alive comment
                }
                return Some(frame);
            }
            if self.ended {
                return None;
            }
            match tokio::time::timeout(timeout, self.body.next()).await {
                Err(_) => panic!("no event within {timeout:?}"),
                Ok(None) => self.ended = true,
                Ok(Some(chunk)) => self
                    .buffer
                    .push_str(std::str::from_utf8(&chunk.expect("chunk")).expect("utf-8")),
            }
        }
    }

    /// The next event envelope of a session stream, or `None` when the
    /// stream ends. Panics after `timeout` without one.
    pub async fn next(&mut self, timeout: Duration) -> Option<Value> {
        let frame = self.frame(timeout).await?;
        assert!(
            frame.event.is_none(),
            "frames must not carry an event: field"
        );
        let envelope: Value = serde_json::from_str(&frame.data).expect("data is JSON");
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
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                let data: String = frame
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|v| v.strip_prefix(' ').unwrap_or(v))
                    .collect();
                if data.is_empty() {
                    continue;
                }
                return serde_json::from_str(&data).ok();
            }
            match tokio::time::timeout(timeout, self.body.next()).await {
                Ok(Some(Ok(chunk))) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                _ => {
                    self.ended = true;
                    return None;
                }
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
