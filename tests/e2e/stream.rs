//! The event stream: replay, tail, and exact resumption under concurrent appends.

use std::time::Duration;

use rand::Rng;
use serde_json::{Value, json};

use crate::support::{self, KEY, Server};

#[tokio::test]
async fn resuming_from_random_event_ids_under_concurrent_appends_is_exact() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("hello", &support::guest("hello")).await;
    // A long reply: one delta per word, appended while clients reconnect.
    let words: Vec<String> = (0..8000).map(|i| format!("w{i}")).collect();
    let session = server
        .session("hello", "/chat", json!(words.join(" ")))
        .await;

    // The reference: one uninterrupted client.
    let reference = async {
        let mut stream = server.events(&session, None).await;
        stream.until(&["TURN_ENDED"]).await
    };
    // The resumer: reads a random number of events, drops the connection,
    // resumes with Last-Event-ID (header, or the query parameter), repeatedly.
    // It counts the resumes made while the turn was still appending: the
    // race this test is about must have happened.
    let resumer = async {
        let mut got: Vec<Value> = Vec::new();
        let mut use_query = false;
        let mut while_running = 0;
        loop {
            let last = got.last().map(|e| e["id"].as_str().unwrap().to_string());
            if last.is_some() {
                let (_, record) = server.get(&format!("/sessions/{session}")).await;
                if record["status"] == "running" {
                    while_running += 1;
                }
            }
            let mut stream = if use_query && last.is_some() {
                let url = format!(
                    "/sessions/{session}/events?last_event_id={}",
                    last.as_deref().unwrap()
                );
                let response = server
                    .client
                    .get(server.url(&url))
                    .bearer_auth(KEY)
                    .send()
                    .await
                    .unwrap();
                support::EventStream::new(response)
            } else {
                server.events(&session, last.as_deref()).await
            };
            use_query = !use_query;
            // Short reads at first, so that resumes start while the turn
            // appends; then any length.
            let most = if got.len() < 200 { 20 } else { 400 };
            let take = rand::rng().random_range(1..most);
            for _ in 0..take {
                let event = stream
                    .next(Duration::from_secs(60))
                    .await
                    .expect("stream open");
                let done = event["type"] == "TURN_ENDED";
                got.push(event);
                if done {
                    return (got, while_running);
                }
            }
        }
    };
    let (reference, (resumed, while_running)) = tokio::join!(reference, resumer);
    eprintln!("resumes while the turn appended: {while_running}");
    assert!(
        while_running > 0,
        "no resume overlapped the turn's appends: nothing was tested"
    );
    assert_eq!(reference.len(), resumed.len());
    assert_eq!(
        reference, resumed,
        "exactly the same events, once each, in order"
    );
    for (i, event) in reference.iter().enumerate() {
        assert_eq!(event["seq"], i as u64);
    }
    // Every id is a UUIDv7 of RFC 9562's variant (docs/events.md); on redb
    // a session's ids carry their seq, so they sort by it too.
    let ids: Vec<uuid::Uuid> = (reference.iter())
        .map(|event| event["id"].as_str().unwrap().parse().unwrap())
        .collect();
    for id in &ids {
        assert_eq!(id.get_version(), Some(uuid::Version::SortRand), "{id}");
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122, "{id}");
    }
    if !support::on_postgres() {
        assert!(ids.is_sorted(), "ids in seq order");
    }

    // Resuming after the end of a finished turn gives nothing more until the next turn.
    let last = reference.last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut tail = server.events(&session, Some(&last)).await;
    let (status, _) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": "next"}),
        )
        .await;
    assert_eq!(status, 202);
    let next = tail.until(&["TURN_ENDED"]).await;
    assert_eq!(next[0]["seq"], reference.len() as u64);
    assert_eq!(next[0]["type"], "TURN_STARTED");
}

#[tokio::test]
async fn the_header_wins_over_the_query_and_unknown_ids_are_refused() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("hello", &support::guest("hello")).await;
    let session = server.session("hello", "/chat", json!("a b c")).await;
    let events = server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED"])
        .await;
    let id = |i: usize| events[i]["id"].as_str().unwrap().to_string();
    let response = server
        .client
        .get(server.url(&format!(
            "/sessions/{session}/events?last_event_id={}",
            id(1)
        )))
        .bearer_auth(KEY)
        .header("Last-Event-ID", id(5))
        .send()
        .await
        .unwrap();
    let mut stream = support::EventStream::new(response);
    assert_eq!(
        stream.next(Duration::from_secs(10)).await.unwrap()["seq"],
        6
    );

    let other = server.session("hello", "/chat", json!("x")).await;
    for bad in [
        "not-a-uuid".to_string(),
        uuid::Uuid::now_v7().to_string(),
        id(3),
    ] {
        let response = server
            .client
            .get(server.url(&format!("/sessions/{other}/events")))
            .bearer_auth(KEY)
            .header("Last-Event-ID", &bad)
            .send()
            .await
            .unwrap();
        let (status, body) = support::status_and_json(response).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("unknown_event_id")),
            "{bad}"
        );
    }
    let response = server
        .client
        .get(server.url(&format!("/sessions/{}/events", uuid::Uuid::now_v7())))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}

/// A client that stops reading while its session streams far more than the
/// live feed holds (128 events) falls behind; the server catches it up from
/// the journal, and it still gets every event once, in order.
#[tokio::test]
async fn a_reader_that_falls_behind_catches_up_from_the_journal_exactly() {
    // Within the default 100 000 events a turn may write.
    const DELTAS: u64 = 99_000;
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("bench", &support::guest("bench")).await;
    let session = server
        .session("bench", "/stream", json!({"deltas": DELTAS}))
        .await;
    let mut stream = server.events(&session, None).await;
    let first = stream
        .next(Duration::from_secs(60))
        .await
        .expect("a first event");
    // Stop reading until the turn is over (~30 MB of frames): the sockets'
    // buffers fill, the server's stream stops, the live feed runs past it.
    let mut polls = 0;
    loop {
        let (status, body) = server.get(&format!("/sessions/{session}")).await;
        assert_eq!(status, 200, "{body}");
        if body["status"] != "running" {
            assert_eq!(body["status"], "idle", "{body}");
            break;
        }
        polls += 1;
        assert!(polls < 2400, "the turn did not end within two minutes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut events = vec![first];
    events.extend(stream.until(&["TURN_ENDED"]).await);
    // SESSION_CREATED, TURN_STARTED, MESSAGE_START, the deltas, MESSAGE_END, TURN_ENDED.
    assert_eq!(events.len() as u64, DELTAS + 5);
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["seq"], i as u64, "event {i} out of order or repeated");
    }
    let metrics = server.metrics().await;
    let catch_ups: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("agenthost_sse_catch_ups_total "))
        .and_then(|v| v.trim().parse().ok())
        .expect("agenthost_sse_catch_ups_total in /metrics");
    assert!(catch_ups >= 1, "the stream never fell behind: {catch_ups}");
}
