//! SIGTERM: open streams end, running turns finish within the grace period,
//! the process exits, and clients resume after the restart without a gap.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{self, Server};

#[tokio::test]
async fn sigterm_ends_streams_lets_turns_finish_and_clients_resume() {
    let dir = support::data_dir();
    let mut server = Server::start(dir.path()).await;
    server.deploy("hello", &support::guest("hello")).await;
    server.deploy("slow", &support::guest("slow")).await;

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
    let busy = server
        .session("slow", "/slow", json!({"sleep_ms": 1500}))
        .await;
    let mut busy_stream = server.events(&busy, None).await;
    let mut busy_seen = busy_stream.until(&["MESSAGE_DELTA"]).await;

    server.terminate();
    for (_, stream, seen) in &mut streams {
        while let Some(event) = stream.next(Duration::from_secs(30)).await {
            seen.push(event);
        }
    }
    while let Some(event) = busy_stream.next(Duration::from_secs(30)).await {
        busy_seen.push(event);
    }
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
    for (session, _, seen) in streams.iter().take(6) {
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
