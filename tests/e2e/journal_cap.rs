//! The cap on a session's journal (`--max-session-journal-mb`,
//! docs/limits.md#sessions): the `rogue` fixture's `/torrent` writes about
//! 2 MiB of events per MiB asked (deltas, then the message's whole text at
//! its end). Under a 5 MiB cap two turns of 1 fit; the third, asking 10,
//! ends with TURN_ERROR `output_limit` naming the flag once its events
//! would pass the cap, and the session then refuses input with 409
//! `journal_full` (a queued input too), while a new session goes on.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{self, Server};

/// The TURN_ENDED or TURN_ERROR of `turn` (the stream replays from the start).
async fn turn_end(server: &Server, session: &str, turn: u64) -> Value {
    let mut stream = server.events(session, None).await;
    while let Some(event) = stream.next(Duration::from_secs(120)).await {
        let ending = matches!(event["type"].as_str(), Some("TURN_ENDED" | "TURN_ERROR"));
        if ending && event["payload"]["turn"] == turn {
            return event;
        }
    }
    panic!("turn {turn} of {session} never ended");
}

async fn input(server: &Server, session: &str, body: Value) -> (u16, Value) {
    server
        .post(&format!("/sessions/{session}/input"), body)
        .await
}

#[tokio::test]
async fn a_sessions_journal_is_capped_in_bytes() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--max-session-journal-mb", "5"]).await;
    server.deploy("rogue", &support::guest("rogue")).await;
    let session = server.session("rogue", "/torrent", json!(1)).await;
    let end = turn_end(&server, &session, 1).await;
    assert_eq!(end["type"], "TURN_ENDED", "{end}");
    let (status, body) = input(&server, &session, json!({"input": 1})).await;
    assert_eq!(status, 202, "{body}");
    let end = turn_end(&server, &session, 2).await;
    assert_eq!(end["type"], "TURN_ENDED", "{end}");

    // The third turn would pass the cap: it ends with output_limit.
    let (status, body) = input(&server, &session, json!({"input": 10})).await;
    assert_eq!(status, 202, "{body}");
    let end = turn_end(&server, &session, 3).await;
    assert_eq!(end["type"], "TURN_ERROR", "{end}");
    assert_eq!(end["payload"]["kind"], "output_limit", "{end}");
    let message = end["payload"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cap of 5 MiB (--max-session-journal-mb)"),
        "{message}"
    );

    // The session takes no more input, queued or not.
    for body in [
        json!({"input": 1}),
        json!({"input": 1, "on_busy": "enqueue"}),
    ] {
        let (status, refused) = input(&server, &session, body).await;
        assert_eq!(status, 409, "{refused}");
        assert_eq!(refused["error"]["code"], "journal_full", "{refused}");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("--max-session-journal-mb 5"), "{message}");
    }
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["turn"], 3, "{record}");

    // The cap is per session: a new one runs.
    let other = server.session("rogue", "/torrent", json!(1)).await;
    let end = turn_end(&server, &other, 1).await;
    assert_eq!(end["type"], "TURN_ENDED", "{end}");
}
