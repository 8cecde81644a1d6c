//! The load phase: C workers, each creating sessions on `/stream` and sending
//! one follow-up turn per session, timing each turn from before its POST to
//! its first `MESSAGE_DELTA` and its `TURN_ENDED` on the event stream.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::json;

use super::client::Api;
use super::metrics::{Probe, Resources};
use super::sse::EventStream;
use super::stats::{Latency, rate};
use crate::wire::Accepted;

/// When the load phase stops starting turns.
#[derive(Clone, Copy)]
pub(super) enum Stop {
    Duration(Duration),
    /// This many turns in all (first turns and follow-ups).
    Turns(u64),
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::Duration(d) => write!(f, "{}", humantime::format_duration(*d)),
            Stop::Turns(n) => write!(f, "{n} turns"),
        }
    }
}

#[derive(Serialize)]
pub(super) struct Load {
    pub seconds: f64,
    pub sessions: u64,
    pub turns: u64,
    pub events: u64,
    pub turns_per_sec: f64,
    pub events_per_sec: f64,
    /// POST /sessions → the first MESSAGE_DELTA.
    pub first_delta: Option<Latency>,
    /// POST /sessions → TURN_ENDED.
    pub turn: Option<Latency>,
    /// POST /sessions/{id}/input → the first MESSAGE_DELTA of that turn.
    pub followup_first_delta: Option<Latency>,
    pub resources: Resources,
}

/// What one worker recorded.
#[derive(Default)]
struct Samples {
    sessions: u64,
    turns: u64,
    events: u64,
    first_delta: Vec<Duration>,
    turn: Vec<Duration>,
    followup_first_delta: Vec<Duration>,
}

pub(super) async fn load(
    api: &Api,
    app: &str,
    concurrency: u64,
    stop: Stop,
    deltas: u64,
) -> anyhow::Result<Load> {
    let probe = Probe::start(api).await?;
    let started = Instant::now();
    let claimed = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (api, app, claimed) = (api.clone(), app.to_string(), claimed.clone());
            let claim = move || match stop {
                Stop::Duration(d) => started.elapsed() < d,
                Stop::Turns(n) => claimed.fetch_add(1, Ordering::Relaxed) < n,
            };
            tokio::spawn(async move { worker(&api, &app, deltas, claim).await })
        })
        .collect();
    let mut all = Samples::default();
    for worker in workers {
        let samples = worker.await.context("a load worker panicked")??;
        all.sessions += samples.sessions;
        all.turns += samples.turns;
        all.events += samples.events;
        all.first_delta.extend(samples.first_delta);
        all.turn.extend(samples.turn);
        all.followup_first_delta
            .extend(samples.followup_first_delta);
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(Load {
        seconds,
        sessions: all.sessions,
        turns: all.turns,
        events: all.events,
        turns_per_sec: rate(all.turns, seconds),
        events_per_sec: rate(all.events, seconds),
        first_delta: Latency::of(&all.first_delta),
        turn: Latency::of(&all.turn),
        followup_first_delta: Latency::of(&all.followup_first_delta),
        resources: probe.finish(api).await?,
    })
}

/// Sessions one after the other while `claim` grants a turn: the first turn,
/// then one follow-up on a fresh stream resumed after the first turn's end.
async fn worker(
    api: &Api,
    app: &str,
    deltas: u64,
    claim: impl Fn() -> bool,
) -> anyhow::Result<Samples> {
    let mut samples = Samples::default();
    let input = json!({"deltas": deltas});
    while claim() {
        let posted = Instant::now();
        let session = api.create_session(app, "/stream", input.clone()).await?;
        let mut events = api.events(&session, None).await?;
        let first = read_turn(&mut events, posted).await?;
        drop(events);
        samples.sessions += 1;
        samples.turns += 1;
        samples.events += first.events;
        samples.first_delta.extend(first.first_delta);
        samples.turn.push(first.ended);
        if !claim() {
            break;
        }
        let posted = Instant::now();
        let body = json!({"input": input});
        let _: Accepted = (api.post(&format!("/sessions/{session}/input"), &body)).await?;
        let mut events = api.events(&session, Some(&first.last_id)).await?;
        let followup = read_turn(&mut events, posted).await?;
        samples.turns += 1;
        samples.events += followup.events;
        samples.followup_first_delta.extend(followup.first_delta);
    }
    Ok(samples)
}

/// One turn as seen on its event stream.
pub(super) struct TurnRead {
    /// From `since` to the first MESSAGE_DELTA (none if the turn had none).
    pub first_delta: Option<Duration>,
    /// From `since` to TURN_ENDED.
    pub ended: Duration,
    /// The id of the TURN_ENDED event (the cursor for the next turn).
    pub last_id: String,
    /// Events read, TURN_ENDED included.
    pub events: u64,
}

/// Reads up to the next TURN_ENDED; a failed or ended session is an error.
pub(super) async fn read_turn(
    events: &mut EventStream,
    since: Instant,
) -> anyhow::Result<TurnRead> {
    let mut first_delta = None;
    let mut count = 0;
    loop {
        let event = events.expect("TURN_ENDED").await?;
        count += 1;
        match event.kind.as_str() {
            "MESSAGE_DELTA" if first_delta.is_none() => first_delta = Some(since.elapsed()),
            "TURN_ENDED" => {
                return Ok(TurnRead {
                    first_delta,
                    ended: since.elapsed(),
                    last_id: event.id,
                    events: count,
                });
            }
            "TURN_ERROR" => bail!("a turn failed: {}", event.failure()),
            "SESSION_ENDED" => bail!("the session ended unexpectedly"),
            _ => {}
        }
    }
}
