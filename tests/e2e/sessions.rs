//! Sessions and turns: order, history, 409 rules, guest failures, pinning, restarts.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::hold::{Hold, deploy_fetch};
use crate::support::{self, KEY, Server, agents, types};

async fn hello_server() -> (tempfile::TempDir, Server) {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let row = server.deploy("hello", &support::guest("hello")).await;
    assert_eq!(row["status"], "active", "{row}");
    (dir, server)
}

#[tokio::test]
async fn a_turn_streams_in_seq_order_with_the_input_as_a_user_message() {
    let (_dir, server) = hello_server().await;
    let session = server
        .session("hello", "/chat", json!("hello big world"))
        .await;
    let mut stream = server.events(&session, None).await;
    let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    assert_eq!(
        types(&events),
        [
            "SESSION_CREATED",
            "TURN_STARTED",
            "MESSAGE_START",
            "MESSAGE_DELTA",
            "MESSAGE_END",
            "MESSAGE_START",
            "MESSAGE_DELTA",
            "MESSAGE_DELTA",
            "MESSAGE_DELTA",
            "MESSAGE_DELTA",
            "MESSAGE_END",
            "TURN_ENDED",
        ]
    );
    // Event ids are UUIDv7 on both engines (docs/events.md); on redb they
    // carry the seq in their counter bits, so a session's ids sort by seq.
    let ids: Vec<uuid::Uuid> = (events.iter())
        .map(|event| uuid::Uuid::parse_str(event["id"].as_str().unwrap()).unwrap())
        .collect();
    for (i, (event, id)) in events.iter().zip(&ids).enumerate() {
        assert_eq!(event["seq"], i as u64);
        assert_eq!(event["session_id"], session.as_str());
        assert!(event["created_at"].as_str().unwrap().ends_with('Z'));
        assert_eq!(id.get_version_num(), 7);
    }
    if !support::on_postgres() {
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
    }
    assert_eq!(events[0]["payload"]["input"], "hello big world");
    assert_eq!(
        events[1]["payload"],
        json!({"turn": 1, "reason": {"kind": "input"}, "input": "hello big world"})
    );
    assert_eq!(events[2]["payload"]["role"], "user");
    assert_eq!(events[4]["payload"]["text"], "hello big world");
    assert_eq!(events[5]["payload"]["role"], "assistant");
    let deltas: String = events[6..10]
        .iter()
        .map(|e| {
            assert_eq!(e["payload"]["delta"]["type"], "text");
            e["payload"]["delta"]["text"].as_str().unwrap()
        })
        .collect();
    assert_eq!(deltas, "You said: hello big world");
    assert_eq!(events[10]["payload"]["text"], deltas);
    let (status, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(status, 200);
    assert_eq!(record["status"], "idle");
    assert_eq!(record["app"], "hello");
    assert_eq!(record["route"], "/chat");
}

#[tokio::test]
async fn a_follow_up_turn_answers_from_history_and_input_after_turn_ended_is_202() {
    let (_dir, server) = hello_server().await;
    let session = server.session("hello", "/chat", json!("first thing")).await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;
    // Right after TURN_ENDED is seen, input is accepted: the release is in the same commit.
    for text in ["second thing", "third thing"] {
        let (status, body) = server
            .post(
                &format!("/sessions/{session}/input"),
                json!({"input": text}),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        stream.until(&["TURN_ENDED"]).await;
    }
    let (status, _) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": {"text": "What did I say before?"}}),
        )
        .await;
    assert_eq!(status, 202);
    let events = stream.until(&["TURN_ENDED"]).await;
    let reply = events
        .iter()
        .rfind(|e| e["type"] == "MESSAGE_END" && e["payload"]["role"] == "assistant")
        .unwrap();
    assert_eq!(
        reply["payload"]["text"],
        r#"Before, you said: "first thing", "second thing", "third thing""#
    );
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["turn"], 4);
}

#[tokio::test]
async fn input_while_a_turn_runs_is_409() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    // The turn GETs an upstream that holds the request until released: it
    // runs for sure until then, however slow the machine.
    let held = Hold::start().await;
    held.deploy_fetch(&server).await;
    let session = server.session("fetch", "/fetch", held.input()).await;
    let mut stream = server.events(&session, None).await;
    held.wait_arrived(1).await;
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["status"], "running");
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": "hi"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "conflict");
    held.release();
    let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:#?}");
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": held.input()}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
}

/// Inputs racing on one idle session: exactly one starts a turn (202), the
/// others are 409, and the journal has one `TURN_STARTED` for them. The
/// winner's turn is held, so the losers cannot have come after it ended;
/// some loser was sent before the winner's answer came back, so they raced.
#[tokio::test]
async fn inputs_racing_on_an_idle_session_start_one_turn() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    let (warm, race) = (Hold::start().await, Hold::start().await);
    deploy_fetch(&server, &[&warm, &race]).await;
    warm.release();
    let session = server.session("fetch", "/fetch", warm.input()).await;
    let mut stream = server.events(&session, None).await;
    let first = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    assert_eq!(first.last().unwrap()["type"], "TURN_ENDED", "{first:#?}");

    const RACERS: usize = 8;
    let path = format!("/sessions/{session}/input");
    let sends = (0..RACERS).map(|_| async {
        let sent = Instant::now();
        let (status, body) = server.post(&path, json!({"input": race.input()})).await;
        (sent, Instant::now(), status, body)
    });
    let answers = futures::future::join_all(sends).await;
    let (winners, losers): (Vec<_>, Vec<_>) = answers.iter().partition(|a| a.2 == 202);
    assert_eq!(winners.len(), 1, "{answers:#?}");
    for (_, _, status, body) in &losers {
        assert_eq!(*status, 409, "{body}");
        assert_eq!(body["error"]["code"], "conflict", "{body}");
    }
    let won_at = winners[0].1;
    assert!(
        losers.iter().any(|(sent, ..)| *sent < won_at),
        "no input was in flight while the winner was decided"
    );
    race.wait_arrived(1).await;
    race.release();
    let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:#?}");
    // Nothing else started: one more TURN_STARTED, one request to `race`.
    let last = events.last().unwrap()["seq"].as_u64().unwrap();
    let all = server.events(&session, None).await.until_seq(last).await;
    let started: Vec<&Value> = (all.iter())
        .filter(|e| e["type"] == "TURN_STARTED")
        .collect();
    assert_eq!(started.len(), 2, "{all:#?}");
    assert_eq!(race.arrived(), 1);
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["turn"], 2, "{record}");
}

/// Runs one turn of the rogue fixture on `route`; returns the turn's events.
async fn rogue_turn(server: &Server, route: &str) -> (String, Vec<Value>) {
    let session = server.session("rogue", route, json!("go")).await;
    let mut stream = server.events(&session, None).await;
    let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    (session, events)
}

#[tokio::test]
async fn guest_failures_end_the_turn_with_turn_error_and_input_is_accepted_after() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("rogue", &support::guest("rogue")).await;
    for (route, kind, needle) in [
        ("/panic", "panic", "rogue panic: boom"),
        ("/trap", "trap", "unreachable"),
        ("/error", "agent_error", "agent said no"),
        ("/bad-order", "invalid_order", "not open"),
    ] {
        let (session, events) = rogue_turn(&server, route).await;
        let last = events.last().unwrap();
        assert_eq!(last["type"], "TURN_ERROR", "{route}: {events:?}");
        assert_eq!(last["payload"]["kind"], kind, "{route}: {last}");
        assert!(
            last["payload"]["message"]
                .as_str()
                .unwrap()
                .contains(needle),
            "{route}: {last}"
        );
        let (_, record) = server.get(&format!("/sessions/{session}")).await;
        assert_eq!(record["status"], "errored");
        // Never 409 after an errored turn: a new message is the recovery.
        let (status, body) = server
            .post(
                &format!("/sessions/{session}/input"),
                json!({"input": "again"}),
            )
            .await;
        assert_eq!(status, 202, "{route}: {body}");
    }
}

/// A tool call id is unique within the session, not only within its turn:
/// a later turn that reuses one fails, and nothing of its step is journaled.
#[tokio::test]
async fn a_tool_call_id_of_an_earlier_turn_is_refused() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("rogue", &support::guest("rogue")).await;
    let (session, first) = rogue_turn(&server, "/same-id").await;
    assert_eq!(first.last().unwrap()["type"], "TURN_ENDED", "{first:?}");
    assert_eq!(
        types(&first).iter().filter(|t| **t == "TOOL_CALL").count(),
        1,
        "{first:?}"
    );
    let mut stream = server
        .events(&session, first.last().unwrap()["id"].as_str())
        .await;
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": "again"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let second = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    let last = second.last().unwrap();
    assert_eq!(last["type"], "TURN_ERROR", "{second:?}");
    assert_eq!(last["payload"]["kind"], "invalid_order", "{last}");
    assert!(
        (last["payload"]["message"].as_str().unwrap())
            .contains("`call_same` is used twice in this session"),
        "{last}"
    );
    assert!(!types(&second).contains(&"TOOL_CALL"), "{second:?}");
}

/// Every turn runs in a fresh instance, also when the host made it ahead of
/// the turn (a spare, runtime/turn/spare.rs): a guest's global never carries over,
/// across turns of one session or of several sessions running at once.
#[tokio::test]
async fn every_turn_runs_in_a_fresh_instance_made_ahead_or_not() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("rogue", &support::guest("rogue")).await;
    let fresh = vec!["turns in this instance: 1".to_string()];
    let (session, mut turn) = rogue_turn(&server, "/remember").await;
    assert_eq!(agents::said(&turn), fresh, "{turn:?}");
    for _ in 0..3 {
        let after = turn.last().unwrap()["id"].as_str().map(String::from);
        let mut stream = server.events(&session, after.as_deref()).await;
        agents::input(&server, &session, "again").await;
        turn = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
        assert_eq!(agents::said(&turn), fresh, "{turn:?}");
    }
    let sessions = (0..4).map(|_| rogue_turn(&server, "/remember"));
    for (_, turn) in futures::future::join_all(sessions).await {
        assert_eq!(agents::said(&turn), fresh, "{turn:?}");
    }
}

#[tokio::test]
async fn an_ended_session_refuses_input_and_closes_its_stream() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("rogue", &support::guest("rogue")).await;
    let session = server.session("rogue", "/end", json!("bye")).await;
    let mut stream = server.events(&session, None).await;
    let events = stream.until(&["SESSION_ENDED"]).await;
    assert_eq!(
        types(&events[events.len() - 2..]),
        ["TURN_ENDED", "SESSION_ENDED"]
    );
    assert!(
        stream.next(Duration::from_secs(10)).await.is_none(),
        "the stream closes after SESSION_ENDED"
    );
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": "more"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["status"], "ended");
    // Reconnecting after the end: 204, so an EventSource stops retrying.
    let last = events.last().unwrap()["id"].as_str().unwrap();
    let response = server
        .client
        .get(server.url(&format!("/sessions/{session}/events")))
        .bearer_auth(KEY)
        .header("Last-Event-ID", last)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);

    // Writing after end-session is refused: the agent's error ends the turn,
    // and the session still ends.
    let session = server.session("rogue", "/after-end", json!("go")).await;
    let events = server
        .events(&session, None)
        .await
        .until(&["SESSION_ENDED"])
        .await;
    assert_eq!(
        types(&events[events.len() - 2..]),
        ["TURN_ERROR", "SESSION_ENDED"]
    );
    let error = &events[events.len() - 2]["payload"];
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("session has ended"),
        "{error}"
    );
    assert!(
        !events.iter().any(|e| e["payload"]["role"] == "assistant"),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_panic_in_an_sdk_agent_reaches_turn_error() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("slow", &support::guest("slow")).await;
    let session = server
        .session("slow", "/slow", json!({"panic": "the sky fell"}))
        .await;
    let events = server
        .events(&session, None)
        .await
        .until(&["TURN_ERROR", "TURN_ENDED"])
        .await;
    let last = &events.last().unwrap()["payload"];
    assert_eq!(last["kind"], "panic", "{last}");
    assert!(
        last["message"].as_str().unwrap().contains("the sky fell"),
        "{last}"
    );
}

#[tokio::test]
async fn sessions_keep_their_deployment_across_redeploys_and_restarts() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let hello = support::guest("hello");
    let v1 = server.deploy("hello", &hello).await;
    let old = server
        .session("hello", "/chat", json!("on version one"))
        .await;
    server.events(&old, None).await.until(&["TURN_ENDED"]).await;
    let v2 = server.deploy("hello", &hello).await;
    assert_eq!(
        (v2["version"].as_u64(), v2["status"].as_str()),
        (Some(2), Some("active"))
    );
    let (_, rows) = server.get("/apps/hello/deployments").await;
    assert_eq!(rows[1]["id"], v1["id"]);
    assert_eq!(
        (rows[1]["status"].as_str(), rows[1]["active"].as_bool()),
        (Some("retired"), Some(false))
    );
    let new = server
        .session("hello", "/chat", json!("on version two"))
        .await;
    let (_, record) = server.get(&format!("/sessions/{new}")).await;
    assert_eq!(record["deployment_id"], v2["id"]);
    let (_, record) = server.get(&format!("/sessions/{old}")).await;
    assert_eq!(record["deployment_id"], v1["id"]);

    server.kill();
    // A damaged precompiled artifact is detected by its hash and rebuilt from
    // the kept component.
    let artifact = dir
        .path()
        .join("deployments")
        .join(v1["id"].as_str().unwrap())
        .join("component.cwasm");
    std::fs::write(&artifact, b"damaged").unwrap();
    let server = Server::start(dir.path()).await;
    let (status, _) = server
        .post(
            &format!("/sessions/{old}/input"),
            json!({"input": "still there?"}),
        )
        .await;
    assert_eq!(status, 202);
    let events = server
        .events(&old, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:?}");
    let (_, record) = server.get(&format!("/sessions/{old}")).await;
    assert_eq!(
        (
            record["deployment_id"].clone(),
            record["deployment_version"].clone()
        ),
        (v1["id"].clone(), json!(1))
    );
}

#[tokio::test]
async fn a_turn_cut_by_a_crash_is_closed_at_restart_and_input_is_accepted() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("slow", &support::guest("slow")).await;
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 60000}))
        .await;
    server
        .events(&session, None)
        .await
        .until(&["MESSAGE_DELTA"])
        .await;
    server.kill();
    let server = Server::start(dir.path()).await;
    let events = server
        .events(&session, None)
        .await
        .until(&["TURN_ERROR"])
        .await;
    assert_eq!(events.last().unwrap()["payload"]["kind"], "host_restarted");
    // The message the agent had open is closed with what was committed of it.
    let closed = &events[events.len() - 2];
    assert_eq!(closed["type"], "MESSAGE_END", "{events:?}");
    assert_eq!(closed["payload"]["text"], "sleeping");
    assert_eq!(closed["payload"]["incomplete"], true);
    let (status, _) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": {"sleep_ms": 0}}),
        )
        .await;
    assert_eq!(status, 202);
}

#[tokio::test]
async fn listing_filters_and_paginates() {
    let (_dir, server) = hello_server().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let id = server
            .session("hello", "/chat", json!(format!("s{i}")))
            .await;
        server.events(&id, None).await.until(&["TURN_ENDED"]).await;
        ids.push(id);
    }
    let (status, page) = server.get("/sessions?limit=2").await;
    assert_eq!(status, 200);
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    assert_eq!(
        page["items"][0]["session_id"],
        ids[4].as_str(),
        "newest first"
    );
    let mut seen: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/sessions?app=hello&status=idle&limit=2&cursor={c}"),
            None => "/sessions?app=hello&status=idle&limit=2".to_string(),
        };
        let (_, page) = server.get(&path).await;
        for item in page["items"].as_array().unwrap() {
            seen.push(item["session_id"].as_str().unwrap().to_string());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    ids.reverse();
    assert_eq!(seen, ids);
    let (_, page) = server.get("/sessions?status=running").await;
    assert_eq!(page["items"], json!([]));
    let (_, page) = server.get("/sessions?app=nope").await;
    assert_eq!(page["items"], json!([]));
    let (status, body) = server.get("/sessions?status=sleepy").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_query")),
        "{body}"
    );
}

#[tokio::test]
async fn errors_are_json_with_the_right_status() {
    let (_dir, server) = hello_server().await;
    let missing = uuid::Uuid::now_v7();
    let cases = [
        (
            server
                .post("/sessions", json!({"app": "nope", "route": "/chat"}))
                .await,
            404,
            "app_not_found",
        ),
        (
            server
                .post("/sessions", json!({"app": "hello", "route": "/nope"}))
                .await,
            404,
            "route_not_found",
        ),
        (
            server.post("/sessions", json!({"route": "/chat"})).await,
            422,
            "invalid_body",
        ),
        (
            server.get(&format!("/sessions/{missing}")).await,
            404,
            "session_not_found",
        ),
        (
            server.get("/sessions/not-a-uuid").await,
            404,
            "session_not_found",
        ),
        (
            server
                .post(&format!("/sessions/{missing}/input"), json!({"input": 1}))
                .await,
            404,
            "session_not_found",
        ),
        (server.get("/apps/nope").await, 404, "app_not_found"),
        (server.get("/no/such/route").await, 404, "not_found"),
    ];
    for ((status, body), want_status, want_code) in cases {
        assert_eq!(status, want_status, "{body}");
        assert_eq!(body["error"]["code"], want_code, "{body}");
        assert!(body["error"]["message"].is_string());
    }
    // A missing route says which ones the app serves.
    let (_, body) = server
        .post("/sessions", json!({"app": "hello", "route": "/nope"}))
        .await;
    assert_eq!(
        body["error"]["message"], "route `/nope` not found: app `hello` serves /chat",
        "{body}"
    );
    // Malformed JSON, wrong method, missing and wrong keys.
    let response = server
        .client
        .post(server.url("/sessions"))
        .bearer_auth(KEY)
        .header("content-type", "application/json")
        .body("{nope")
        .send()
        .await
        .unwrap();
    let (status, body) = support::status_and_json(response).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_request"))
    );
    let response = server
        .client
        .delete(server.url("/sessions"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    let (status, body) = support::status_and_json(response).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (405, Some("method_not_allowed"))
    );
    for key in [None, Some("wrong"), Some("ahp_0123456789abcdef_00")] {
        let mut request = server.client.get(server.url("/sessions"));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let (status, body) = support::status_and_json(request.send().await.unwrap()).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (401, Some("unauthorized")),
            "{key:?}"
        );
    }
    let response = server
        .client
        .get(server.url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let response = server
        .client
        .get(server.url("/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // A body over the JSON limit: 413, JSON.
    let big = "x".repeat(2 << 20);
    let (status, body) = server
        .post(
            "/sessions",
            json!({"app": "hello", "route": "/chat", "input": big}),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (413, Some("payload_too_large"))
    );
}
