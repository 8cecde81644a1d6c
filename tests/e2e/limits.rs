//! Guest limits: a runaway guest ends its own turn with TURN_ERROR (kind and
//! message) while other sessions keep streaming; the sandbox has no sockets.

use serde_json::{Value, json};

use std::time::Duration;

use crate::support::hold::Hold;
use crate::support::{self, Read, Server, bundle};

async fn deploy_with_limits(server: &Server, slug: &str, guest: &str, limits: &str) {
    let manifest =
        format!("[app]\nslug = \"{slug}\"\n[agent]\nentry = \"agent.wasm\"\n[limits]\n{limits}");
    let component = support::guest(guest);
    let (status, row) = server
        .upload(bundle(&[("agent.wasm", &component)]), &manifest)
        .await;
    assert_eq!(status, 202, "{row}");
    assert_eq!(server.wait_built(&row).await["status"], "active");
}

async fn turn(server: &Server, app: &str, route: &str, input: Value) -> Vec<Value> {
    let session = server.session(app, route, input).await;
    server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await
}

#[tokio::test]
async fn runaway_guests_end_their_own_turn_and_others_keep_streaming() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    let limits = "cpu_fuel = 300000000\nmemory_mb = 32\nmax_events = 500\n";
    deploy_with_limits(&server, "limited", "rogue", limits).await;
    deploy_with_limits(&server, "sleepy", "slow", "wall_clock_secs = 1\n").await;
    server.deploy("hello", &support::guest("hello")).await;
    // A healthy turn held in flight through all the runaways: they run
    // next to it for sure, whatever the machine's speed.
    let held = Hold::start().await;
    held.deploy_fetch(&server).await;
    let waiting = server.session("fetch", "/fetch", held.input()).await;
    held.wait_arrived(1).await;

    // A healthy session streams a long reply while the runaways run.
    let words: Vec<String> = (0..800).map(|i| format!("w{i}")).collect();
    let healthy = turn(&server, "hello", "/chat", json!(words.join(" ")));
    let runaways = async {
        let mut outcomes = Vec::new();
        for (route, kind, needle) in [
            ("/loop", "cpu_limit", "CPU budget"),
            ("/memory", "memory_limit", "32 MiB"),
            // The shadow stack overflows into linear memory, or the wasm stack runs out.
            ("/recurse", "trap", "wasm trap"),
            ("/flood", "limit", "more than 500 events"),
            ("/trap", "trap", "unreachable"),
        ] {
            let events = turn(&server, "limited", route, json!("go")).await;
            outcomes.push((route, kind, needle, events));
        }
        let events = turn(&server, "sleepy", "/slow", json!({"sleep_ms": 30000})).await;
        outcomes.push(("/slow", "deadline", "1 s deadline", events));
        outcomes
    };
    let (healthy, outcomes) = tokio::join!(healthy, runaways);
    let (_, record) = server.get(&format!("/sessions/{waiting}")).await;
    assert_eq!(record["status"], "running", "{record}");
    held.release();
    let waited = (server.events(&waiting, None).await)
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    assert_eq!(waited.last().unwrap()["type"], "TURN_ENDED", "{waited:#?}");
    assert_eq!(healthy.last().unwrap()["type"], "TURN_ENDED");
    assert_eq!(
        healthy
            .iter()
            .filter(|e| e["type"] == "MESSAGE_DELTA")
            .count(),
        802,
        "the user message, \"You said:\" and one delta per word"
    );
    for (route, kind, needle, events) in outcomes {
        let last = &events.last().unwrap();
        assert_eq!(last["type"], "TURN_ERROR", "{route}: {events:?}");
        assert_eq!(last["payload"]["kind"], kind, "{route}: {last}");
        let message = last["payload"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{route}: {message}");
    }
    // The flood's open message was closed, marked incomplete, with what was committed.
    let flood = turn(&server, "limited", "/flood", json!("again")).await;
    let closed = &flood[flood.len() - 2];
    assert_eq!(
        (
            closed["type"].as_str(),
            closed["payload"]["incomplete"].as_bool()
        ),
        (Some("MESSAGE_END"), Some(true))
    );
}

#[tokio::test]
async fn the_sandbox_has_no_sockets_and_none_of_the_hosts_environment() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("rogue", &support::guest("rogue")).await;
    // Even the host's own API on loopback is out of reach.
    let address = server.url.trim_start_matches("http://").to_string();
    let events = turn(&server, "rogue", "/connect", json!(address)).await;
    let said = events
        .iter()
        .rfind(|e| e["type"] == "MESSAGE_END" && e["payload"]["role"] == "assistant")
        .unwrap();
    assert!(
        said["payload"]["text"]
            .as_str()
            .unwrap()
            .starts_with("refused:"),
        "{said}"
    );
    // Nor does it see the host's environment: only what the platform injects.
    for variable in ["PATH", "HOME", "AGENTHOST_BOOTSTRAP_KEY"] {
        let events = turn(&server, "rogue", "/env", json!(variable)).await;
        let said = events
            .iter()
            .rfind(|e| e["type"] == "MESSAGE_END" && e["payload"]["role"] == "assistant")
            .unwrap();
        assert_eq!(said["payload"]["text"], format!("{variable} is not set"));
    }
    let events = turn(&server, "rogue", "/env", json!("SERVICE_APPROVAL_POLICY")).await;
    let said = events.iter().rfind(|e| e["type"] == "MESSAGE_END").unwrap();
    assert!(
        said["payload"]["text"]
            .as_str()
            .unwrap()
            .starts_with("len=2 "),
        "{said}"
    );
}

#[tokio::test]
async fn turns_beyond_the_concurrency_cap_wait_for_a_slot() {
    let dir = support::data_dir();
    let flags = ["--max-concurrent-turns", "1", "--outbound-allow-private"];
    let server = Server::start_with(dir.path(), &flags).await;
    server.deploy("hello", &support::guest("hello")).await;
    // The one slot is taken by a turn held on an outbound request until
    // the test releases it: it runs for sure while the next is accepted.
    let held = Hold::start().await;
    held.deploy_fetch(&server).await;
    let busy = server.session("fetch", "/fetch", held.input()).await;
    let mut busy_stream = server.events(&busy, None).await;
    held.wait_arrived(1).await;
    // Accepted at once, but it runs only when the one slot frees.
    let queued = server.session("hello", "/chat", json!("me too")).await;
    let (_, record) = server.get(&format!("/sessions/{queued}")).await;
    assert_eq!(record["status"], "running");
    // Whatever it journals before the slot frees, it says nothing.
    let mut queued_stream = server.events(&queued, None).await;
    let mut before = Vec::new();
    loop {
        match queued_stream.read(Duration::from_millis(300)).await {
            Read::Event(event) => before.push(event),
            Read::Silent => break,
            other => panic!("the queued session's stream: {other:?}"),
        }
    }
    assert!(
        !before.iter().any(|e| e["payload"]["role"] == "assistant"),
        "the queued turn ran while the slot was taken: {before:#?}"
    );
    held.release();
    let busy_end = busy_stream.until(&["TURN_ENDED"]).await;
    let queued_events = turn_events(&server, &queued).await;
    let ended_at = busy_end.last().unwrap()["created_at"]
        .as_str()
        .unwrap()
        .to_string();
    let first_reply = queued_events
        .iter()
        .find(|e| e["payload"]["role"] == "assistant")
        .unwrap();
    // RFC 3339 UTC timestamps of one format compare as text.
    assert!(
        first_reply["created_at"].as_str().unwrap() >= ended_at.as_str(),
        "the queued turn ran after the running one: {first_reply} vs {ended_at}"
    );
}

async fn turn_events(server: &Server, session: &str) -> Vec<Value> {
    server
        .events(session, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await
}

/// The server's resident memory in MiB (`VmRSS` of `/proc/<pid>/status`).
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0);
    kib >> 10
}

/// How a turn that ran under an RSS watch ended.
struct Watched {
    /// The turn's last event (TURN_ENDED or TURN_ERROR), if the stream got that far.
    last: Option<Value>,
    /// Events the stream carried for the turn, by type.
    deltas: usize,
    /// How far the server's RSS rose above its level before the turn, in MiB (the peak).
    growth_mib: u64,
}

/// Runs one turn of `session` (already started) while sampling the
/// server's RSS; reads the stream without keeping what it reads. A server
/// whose RSS rises by `bound_mib` is killed on the spot (the test fails,
/// the machine stays up).
async fn watch_turn(server: &Server, session: &str, from: Option<&str>, bound_mib: u64) -> Watched {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::Duration;

    let pid = server.pid();
    let before = rss_mib(pid);
    let peak = Arc::new(AtomicU64::new(before));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn({
        let (peak, done) = (peak.clone(), done.clone());
        async move {
            while !done.load(Ordering::Relaxed) {
                let now = rss_mib(pid);
                peak.fetch_max(now, Ordering::Relaxed);
                if now.saturating_sub(before) >= bound_mib {
                    // Stop a runaway before it takes the machine with it.
                    let _ = std::process::Command::new("kill")
                        .args(["-KILL", &pid.to_string()])
                        .status();
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    });
    let mut stream = server.events(session, from).await;
    let (mut last, mut deltas) = (None, 0);
    // A break (the watcher killed the server), an end or silence stops it.
    while let Read::Event(event) = stream.read(Duration::from_secs(120)).await {
        match event["type"].as_str() {
            Some("MESSAGE_DELTA") => deltas += 1,
            Some("TURN_ENDED" | "TURN_ERROR") => {
                last = Some(event);
                break;
            }
            _ => {}
        }
    }
    done.store(true, Ordering::Relaxed);
    sampler.await.unwrap();
    Watched {
        last,
        deltas,
        growth_mib: peak.load(Ordering::Relaxed).saturating_sub(before),
    }
}

/// Asserts that a watched turn stayed under `bound_mib` and ended with
/// `output_limit`, its message naming `needle`.
fn assert_output_limit(what: &str, watched: &Watched, bound_mib: u64, needle: &str) {
    eprintln!(
        "{what}: RSS +{} MiB, {} deltas",
        watched.growth_mib, watched.deltas
    );
    assert!(
        watched.growth_mib < bound_mib,
        "{what}: the server's RSS grew by {} MiB (at most {bound_mib} allowed)",
        watched.growth_mib
    );
    let last = watched
        .last
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: the turn never ended"));
    assert_eq!(last["type"], "TURN_ERROR", "{what}: {last}");
    assert_eq!(last["payload"]["kind"], "output_limit", "{what}: {last}");
    let message = last["payload"]["message"].as_str().unwrap();
    assert!(message.contains(needle), "{what}: {message}");
}

/// A turn's output is bounded in the host: open messages and bytes per turn
/// (`max_open_messages`, `max_output_mb`), and what waits for the journal
/// (the outbox waits for the commit). The server's memory barely moves, the
/// turn ends with `output_limit`, and the session takes input again.
#[tokio::test]
async fn a_turns_output_is_bounded_and_ends_with_output_limit() {
    const BOUND_MIB: u64 = 256;
    let dir = support::data_dir();
    // The journal's page cache (redb's, 256 MiB by default) is a bound of its
    // own: kept small, so that what is measured is the turn's.
    let server = Server::start_with(dir.path(), &["--journal-cache-mb", "16"]).await;
    server.deploy("hoard", &support::guest("rogue")).await;
    deploy_with_limits(
        &server,
        "wide",
        "rogue",
        "max_open_messages = 64\nmax_output_mb = 16\n",
    )
    .await;
    deploy_with_limits(&server, "torrent", "rogue", "max_output_mb = 512\n").await;
    // Warm up: every app's first turn loads its deployment.
    for app in ["hoard", "wide", "torrent"] {
        let events = turn(&server, app, "/remember", json!("")).await;
        assert_eq!(events.last().unwrap()["type"], "TURN_ENDED");
    }

    // 10 000 messages of 1 MiB each, none closed: the default cap on open
    // messages (16) ends the turn.
    let session = server.session("hoard", "/hold", json!(10_000)).await;
    let watched = watch_turn(&server, &session, None, BOUND_MIB).await;
    assert_output_limit(
        "10 000 open messages",
        &watched,
        BOUND_MIB,
        "more than 16 messages open at once (limits.max_open_messages)",
    );
    assert_eq!(
        watched.deltas, 16,
        "the 16 messages admitted got their text"
    );
    // The session takes input again: one message, closed by the host.
    let (status, body) = server
        .post(&format!("/sessions/{session}/input"), json!({"input": 1}))
        .await;
    assert_eq!(status, 202, "{body}");
    let events = server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED"])
        .await;
    let last_end = events.iter().rfind(|e| e["type"] == "MESSAGE_END").unwrap();
    assert_eq!(
        last_end["payload"]["text"].as_str().map(str::len),
        Some(1 << 20)
    );

    // With 64 messages allowed open, the bytes are what stop it: 16 MiB.
    let session = server.session("wide", "/hold", json!(10_000)).await;
    let watched = watch_turn(&server, &session, None, BOUND_MIB).await;
    assert_output_limit(
        "10 000 open messages under max_output_mb",
        &watched,
        BOUND_MIB,
        "more than 16 MiB of events (limits.max_output_mb)",
    );
    assert!(watched.deltas < 16, "{} deltas", watched.deltas);

    // Deltas as fast as the guest can write them, 512 MiB in all (more
    // than the disk takes meanwhile): the outbox waits for the journal.
    let session = server.session("torrent", "/torrent", json!(100_000)).await;
    let watched = watch_turn(&server, &session, None, BOUND_MIB).await;
    assert_output_limit(
        "a torrent of deltas",
        &watched,
        BOUND_MIB,
        "more than 512 MiB of events (limits.max_output_mb)",
    );
    assert!(watched.deltas > 4000, "{} deltas", watched.deltas);
}

/// The records of refused outbound requests count against `max_output_mb`
/// too: a guest that knocks at a refused origin in a loop, with long paths,
/// writes no more than its limit, and the turn ends with `output_limit`.
#[tokio::test]
async fn refused_outbound_requests_count_against_the_output_limit() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    // No `[outbound] allow`: every origin is refused, each with a record.
    deploy_with_limits(&server, "knock", "fetch", "max_output_mb = 1\n").await;
    let url = format!("https://elsewhere.example/{}", "a".repeat(32 << 10));
    let input = json!({"url": url, "times": 1000});
    let events = turn(&server, "knock", "/knock", input).await;
    let denied = (events.iter())
        .filter(|e| e["type"] == "HTTP_REQUEST_DENIED")
        .count();
    // 1 MiB holds about 32 records of 32 KiB.
    assert!((16..=32).contains(&denied), "{denied} records");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "TURN_ERROR", "{last}");
    assert_eq!(last["payload"]["kind"], "output_limit", "{last}");
    let message = last["payload"]["message"].as_str().unwrap();
    assert!(message.contains("more than 1 MiB of events"), "{message}");
}
