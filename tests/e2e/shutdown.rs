//! SIGTERM: open streams end, running turns finish within the grace period,
//! the process exits, and clients resume after the restart without a gap.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::hold::Hold;
use crate::support::{self, Server};

#[tokio::test]
async fn sigterm_ends_streams_lets_turns_finish_and_clients_resume() {
    let dir = support::data_dir();
    let mut server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    server.deploy("hello", &support::guest("hello")).await;
    // The turn in flight GETs an upstream that holds it until released.
    let held = Hold::start().await;
    held.deploy_fetch(&server).await;

    // Many streams open at their tail, and one turn in flight.
    let mut streams = Vec::new();
    for i in 0..24 {
        let session = server
            .session("hello", "/chat", json!(format!("hello {i}")))
            .await;
        let mut stream = server.events(&session, None).await;
        let seen = stream.until(&["TURN_ENDED"]).await;
        streams.push((session, stream, seen));
    }
    let busy = server.session("fetch", "/fetch", held.input()).await;
    let mut busy_stream = server.events(&busy, None).await;
    held.wait_arrived(1).await;
    let mut busy_seen = Vec::new();

    server.terminate();
    // Every stream ends (the held turn still runs: it cannot have ended).
    for (_, stream, seen) in &mut streams {
        seen.extend(stream.rest_until_end(Duration::from_secs(30)).await);
    }
    busy_seen.extend(busy_stream.rest_until_end(Duration::from_secs(30)).await);
    assert!(
        !(busy_seen.iter()).any(|e| e["type"] == "TURN_ENDED" || e["type"] == "TURN_ERROR"),
        "the held turn ended before its release: {busy_seen:#?}"
    );
    // Released during the grace period, the turn finishes, then the process exits.
    held.release();
    let status = server.wait_exit(Duration::from_secs(60)).await;
    assert!(status.success(), "a clean exit: {status}");

    let server = Server::start(dir.path()).await;
    // The turn in flight finished within the grace period; its client resumes exactly.
    let last = busy_seen.last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let rest = server
        .events(&busy, Some(&last))
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    assert_eq!(rest.last().unwrap()["type"], "TURN_ENDED", "{rest:?}");
    let all: Vec<Value> = [busy_seen, rest].concat();
    for (i, event) in all.iter().enumerate() {
        assert_eq!(event["seq"], i as u64, "no gap, no duplicate");
    }
    // Every other client resumes from its last event and sees the next turn from its first event.
    for (session, _, seen) in &streams {
        let last = seen.last().unwrap();
        let mut resumed = server.events(session, last["id"].as_str()).await;
        let (status, _) = server
            .post(
                &format!("/sessions/{session}/input"),
                json!({"input": "back"}),
            )
            .await;
        assert_eq!(status, 202);
        let next = resumed.until(&["TURN_ENDED"]).await;
        assert_eq!(next[0]["seq"], last["seq"].as_u64().unwrap() + 1);
        assert_eq!(next[0]["type"], "TURN_STARTED");
    }
}
