//! The replay phase: one session with a long turn, written first, then read
//! back from seq 0 and resumed from its middle event.

use std::time::{Duration, Instant};

use anyhow::bail;
use serde::Serialize;
use serde_json::json;

use super::client::Api;
use super::metrics::{Probe, Resources};
use super::stats::rate;

#[derive(Serialize)]
pub(super) struct Replay {
    pub session_id: String,
    /// Events in the session (the deltas plus the turn's other events).
    pub events: u64,
    /// POST /sessions → the session seen idle (polled every 20 ms).
    pub write_seconds: f64,
    pub write_events_per_sec: f64,
    /// The write: the turn streaming the deltas into the journal.
    pub write_resources: Resources,
    pub from_start: Read,
    pub from_middle: Read,
    /// The reads only (the write is not included).
    pub resources: Resources,
}

/// One read of the stream up to the session's last event.
#[derive(Serialize)]
pub(super) struct Read {
    pub events: u64,
    pub seconds: f64,
    /// Request sent → the first event.
    pub first_event_ms: f64,
    pub events_per_sec: f64,
}

pub(super) async fn replay(api: &Api, app: &str, deltas: u64) -> anyhow::Result<Replay> {
    let write_probe = Probe::start(api).await?;
    let posted = Instant::now();
    let session = (api.create_session(app, "/stream", json!({"deltas": deltas}))).await?;
    wait_idle(api, &session).await?;
    let write_seconds = posted.elapsed().as_secs_f64();
    let write_resources = write_probe.finish(api).await?;
    let probe = Probe::start(api).await?;
    // The cursor for the second read: an event in the middle of the deltas.
    let middle_seq = deltas / 2;
    let (from_start, middle) = read(api, &session, None, middle_seq).await?;
    let Some(middle) = middle else {
        bail!("session {session}: no event with seq {middle_seq} on the stream");
    };
    let (from_middle, _) = read(api, &session, Some(&middle), u64::MAX).await?;
    Ok(Replay {
        events: from_start.events,
        write_events_per_sec: rate(from_start.events, write_seconds),
        write_seconds,
        write_resources,
        session_id: session,
        from_start,
        from_middle,
        resources: probe.finish(api).await?,
    })
}

/// Polls the session until its turn is over; anything but `idle` is an error.
pub(super) async fn wait_idle(api: &Api, session: &str) -> anyhow::Result<()> {
    loop {
        match api.session_status(session).await?.as_str() {
            "running" => tokio::time::sleep(Duration::from_millis(20)).await,
            "idle" => return Ok(()),
            status => bail!(
                "session {session}: the turn did not end normally (status {status}; see GET /sessions/{session}/events)"
            ),
        }
    }
}

/// Reads the stream (after `cursor`) up to TURN_ENDED; also returns the id
/// of the event with seq `mark`, if it came by.
async fn read(
    api: &Api,
    session: &str,
    cursor: Option<&str>,
    mark: u64,
) -> anyhow::Result<(Read, Option<String>)> {
    let started = Instant::now();
    let mut events = api.events(session, cursor).await?;
    let mut first_event = None;
    let mut marked = None;
    let mut count = 0;
    loop {
        let event = events.expect("TURN_ENDED").await?;
        first_event.get_or_insert_with(|| started.elapsed());
        count += 1;
        if event.seq == mark {
            marked = Some(event.id.clone());
        }
        match event.kind.as_str() {
            "TURN_ENDED" => break,
            "TURN_ERROR" => bail!("session {session}: the turn failed: {}", event.failure()),
            _ => {}
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let read = Read {
        events: count,
        seconds,
        first_event_ms: first_event.unwrap_or_default().as_secs_f64() * 1000.0,
        events_per_sec: rate(count, seconds),
    };
    Ok((read, marked))
}
