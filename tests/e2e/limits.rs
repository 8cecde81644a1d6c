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
    let server = Server::start(dir.path()).await;
    let limits = "cpu_fuel = 300000000\nmemory_mb = 32\nmax_events = 500\n";
    deploy_with_limits(&server, "limited", "rogue", limits).await;
    deploy_with_limits(&server, "sleepy", "slow", "wall_clock_secs = 1\n").await;
    server.deploy("hello", &support::guest("hello")).await;

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
