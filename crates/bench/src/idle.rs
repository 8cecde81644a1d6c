//! The idle phase: K event streams held open on one session whose turn has
//! ended (it stays open: only the agent ends a session), and what they cost
//! the server in resident memory.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::Serialize;
use serde_json::json;

use super::client::Api;
use super::metrics::{Probe, Resources, Snapshot};
use super::replay::wait_idle;
use super::run::read_turn;
use super::sse::EventStream;

/// Streams being opened at once.
const OPENING: usize = 32;
/// How long one stream may take to open and replay its turn.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// Time given to the server to settle before the second RSS reading.
const SETTLE: Duration = Duration::from_secs(1);

#[derive(Serialize)]
pub(super) struct Idle {
    pub requested: u64,
    pub opened: u64,
    pub open_seconds: f64,
    /// Why fewer than `requested` streams are open, if so.
    pub error: Option<String>,
    pub rss_before_bytes: Option<u64>,
    pub rss_after_bytes: Option<u64>,
    /// (after − before) / opened; noisy for small K.
    pub rss_per_stream_bytes: Option<f64>,
    /// The server's `agenthost_sse_streams_open` with the streams open.
    pub server_streams_open: Option<u64>,
    pub resources: Resources,
}

pub(super) async fn idle(api: &Api, app: &str, streams: u64) -> anyhow::Result<Idle> {
    let session = api
        .create_session(app, "/stream", json!({"deltas": 1}))
        .await?;
    wait_idle(api, &session).await?;
    let probe = Probe::start(api).await?;
    let rss = |snapshot: &Option<Snapshot>| {
        (snapshot.as_ref()).and_then(|s| s.count("process_resident_memory_bytes"))
    };
    let rss_before = rss(&api.metrics().await?);
    let started = Instant::now();
    let mut open = futures::stream::iter(0..streams)
        .map(|_| open_one(api, &session))
        .buffer_unordered(OPENING);
    let mut held: Vec<EventStream> = Vec::new();
    let mut error = None;
    while let Some(result) = open.next().await {
        match result {
            Ok(stream) => held.push(stream),
            Err(err) => {
                error = Some(format!("{err:#}"));
                break;
            }
        }
    }
    drop(open);
    let open_seconds = started.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let after = api.metrics().await?;
    let rss_after = rss(&after);
    let opened = held.len() as u64;
    let resources = probe.finish(api).await?;
    drop(held);
    Ok(Idle {
        requested: streams,
        opened,
        open_seconds,
        error,
        rss_before_bytes: rss_before,
        rss_after_bytes: rss_after,
        rss_per_stream_bytes: (rss_before.zip(rss_after))
            .filter(|_| opened > 0)
            .map(|(before, after)| (after as f64 - before as f64) / opened as f64),
        server_streams_open: after.and_then(|s| s.count("agenthost_sse_streams_open")),
        resources,
    })
}

/// Opens one stream and reads its replay up to TURN_ENDED, so that the
/// server holds it as a tailing, idle stream.
async fn open_one(api: &Api, session: &str) -> anyhow::Result<EventStream> {
    let opening = async {
        let mut stream = api.events(session, None).await?;
        read_turn(&mut stream, Instant::now()).await?;
        Ok(stream)
    };
    match tokio::time::timeout(OPEN_TIMEOUT, opening).await {
        Ok(result) => result,
        Err(_) => anyhow::bail!(
            "a stream did not open within {} s (the server's or the bench's open-file limit?)",
            OPEN_TIMEOUT.as_secs()
        ),
    }
}
