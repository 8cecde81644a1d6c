//! The approval phase: sessions on `/approve` suspend on a gated call; each
//! decision is timed from before its POST to the resumed turn's events on
//! the stream that stayed open.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::{Value, json};

use super::client::Api;
use super::metrics::{Probe, Resources};
use super::stats::Latency;
use crate::wire::Accepted;

#[derive(Serialize)]
pub(super) struct Approval {
    pub sessions: u64,
    /// POST approval → the resumed turn's TURN_STARTED (its first event).
    pub to_turn_started: Option<Latency>,
    /// POST approval → the TOOL_RESULT the resumed agent writes first.
    pub to_tool_result: Option<Latency>,
    /// POST approval → the resumed turn's TURN_ENDED.
    pub to_turn_ended: Option<Latency>,
    pub resources: Resources,
}

#[derive(Default)]
struct Samples {
    turn_started: Vec<Duration>,
    tool_result: Vec<Duration>,
    turn_ended: Vec<Duration>,
}

pub(super) async fn approvals(
    api: &Api,
    app: &str,
    count: u64,
    concurrency: u64,
) -> anyhow::Result<Approval> {
    let probe = Probe::start(api).await?;
    let claimed = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..concurrency.min(count))
        .map(|_| {
            let (api, app, claimed) = (api.clone(), app.to_string(), claimed.clone());
            tokio::spawn(async move {
                let mut samples = Samples::default();
                while claimed.fetch_add(1, Ordering::Relaxed) < count {
                    one(&api, &app, &mut samples).await?;
                }
                anyhow::Ok(samples)
            })
        })
        .collect();
    let mut all = Samples::default();
    for worker in workers {
        let samples = worker.await.context("an approval worker panicked")??;
        all.turn_started.extend(samples.turn_started);
        all.tool_result.extend(samples.tool_result);
        all.turn_ended.extend(samples.turn_ended);
    }
    Ok(Approval {
        sessions: all.turn_ended.len() as u64,
        to_turn_started: Latency::of(&all.turn_started),
        to_tool_result: Latency::of(&all.tool_result),
        to_turn_ended: Latency::of(&all.turn_ended),
        resources: probe.finish(api).await?,
    })
}

/// One session: wait for TOOL_APPROVAL_REQUIRED, approve, read the resumed turn.
async fn one(api: &Api, app: &str, samples: &mut Samples) -> anyhow::Result<()> {
    let session = api.create_session(app, "/approve", Value::Null).await?;
    let mut events = api.events(&session, None).await?;
    loop {
        let event = events.expect("TOOL_APPROVAL_REQUIRED").await?;
        match event.kind.as_str() {
            "TOOL_APPROVAL_REQUIRED" => break,
            "TURN_ENDED" => bail!("session {session}: the turn ended without a gated call"),
            "TURN_ERROR" => bail!("session {session}: the turn failed: {}", event.failure()),
            _ => {}
        }
    }
    let posted = Instant::now();
    let path = format!("/sessions/{session}/approval");
    let _: Accepted = api.post(&path, &json!({"approved": true})).await?;
    let mut started = None;
    let mut result = None;
    loop {
        let event = events.expect("TURN_ENDED").await?;
        match event.kind.as_str() {
            "TURN_STARTED" => started = started.or(Some(posted.elapsed())),
            "TOOL_RESULT" => result = result.or(Some(posted.elapsed())),
            "TURN_ENDED" => break,
            "TURN_ERROR" => bail!(
                "session {session}: the resumed turn failed: {}",
                event.failure()
            ),
            _ => {}
        }
    }
    samples.turn_ended.push(posted.elapsed());
    samples.turn_started.extend(started);
    samples.tool_result.extend(result);
    Ok(())
}
