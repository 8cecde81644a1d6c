//! The approvals feed (`GET /approvals/events`): a snapshot first, then every
//! approval requested, decided or withdrawn in commit order, resumed exactly
//! after a Last-Event-ID; its filter and its refusals; a snapshot bounded by
//! `--approvals-snapshot-max`, the rest paged from `GET /approvals`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{self, Frame, Server};

const WAIT: Duration = Duration::from_secs(60);

async fn deploy_ops(server: &Server) {
    let manifest = "[app]\nslug = \"ops\"\n[agent]\nentry = \"ops.wasm\"\n";
    let component = support::guest("ops");
    server
        .deploy_files(&[("ops.wasm", &component)], manifest)
        .await;
}

/// A session of the ops agent whose second turn waits on deleting `name`.
async fn awaiting(server: &Server, name: &str) -> String {
    let session = server
        .session("ops", "/ops", json!(format!("add {name}")))
        .await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": format!("delete {name}")}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    stream.until(&["TOOL_APPROVAL_REQUIRED"]).await;
    session
}

fn seq(frame: &Frame) -> u64 {
    frame.id.as_deref().unwrap().parse().unwrap()
}

/// The frame's kind, session and journal event type.
fn summary(frame: &Frame) -> (String, String, Value) {
    let data = frame.json();
    assert_eq!(Some(data["type"].as_str().unwrap()), frame.event.as_deref());
    let event_type = data["event"]["type"].clone();
    (
        frame.event.clone().unwrap(),
        data["session_id"].as_str().unwrap().to_string(),
        event_type,
    )
}

#[tokio::test]
async fn the_feed_streams_every_change_and_resumes_exactly_after_its_last_id() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_ops(&server).await;
    // Pending before the feed opens: in its snapshot.
    let a = awaiting(&server, "a").await;
    let mut feed = server.approval_feed("", None).await;
    let snapshot = feed.frame(WAIT).await.unwrap();
    assert_eq!(snapshot.event.as_deref(), Some("APPROVALS_SNAPSHOT"));
    let items = snapshot.json()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["session"]["session_id"], a.as_str());
    assert_eq!(items[0]["event"]["type"], "TOOL_APPROVAL_REQUIRED");
    let at = seq(&snapshot);

    // Live: a request, then a decision.
    let b = awaiting(&server, "b").await;
    let requested = feed.frame(WAIT).await.unwrap();
    assert_eq!(
        summary(&requested),
        (
            "APPROVAL_REQUESTED".into(),
            b.clone(),
            json!("TOOL_APPROVAL_REQUIRED")
        )
    );
    assert_eq!(requested.json()["app"], "ops");
    assert!(seq(&requested) > at);
    let (status, body) = server
        .post(
            &format!("/sessions/{a}/approval"),
            json!({"approved": true}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let decided = feed.frame(WAIT).await.unwrap();
    assert_eq!(
        summary(&decided),
        (
            "APPROVAL_DECIDED".into(),
            a.clone(),
            json!("TOOL_APPROVAL_GRANTED")
        )
    );
    let tool_call_id = requested.json()["tool_call_id"].clone();
    assert_eq!(
        requested.json()["event"]["payload"]["tool_call_id"],
        tool_call_id
    );
    // The client goes away after the request (the decision was sent, but
    // say it never arrived)...
    drop(feed);
    // ...and meanwhile b is ended, c asks and is deleted.
    let (status, body) = server
        .post(&format!("/sessions/{b}/end"), json!({"reason": "done"}))
        .await;
    assert_eq!(status, 200, "{body}");
    let c = awaiting(&server, "c").await;
    assert_eq!(server.delete(&format!("/sessions/{c}")).await, 204);

    // Resumed after the request: exactly what followed it, in order; c's
    // request went with c, its withdrawal stays.
    let mut feed = server
        .approval_feed("", Some(&seq(&requested).to_string()))
        .await;
    let mut frames = Vec::new();
    for _ in 0..3 {
        frames.push(feed.frame(WAIT).await.unwrap());
    }
    let seen: Vec<_> = frames.iter().map(summary).collect();
    assert_eq!(
        seen,
        [
            (
                "APPROVAL_DECIDED".into(),
                a.clone(),
                json!("TOOL_APPROVAL_GRANTED")
            ),
            (
                "APPROVAL_WITHDRAWN".into(),
                b.clone(),
                json!("SESSION_ENDED")
            ),
            ("APPROVAL_WITHDRAWN".into(), c.clone(), Value::Null),
        ]
    );
    assert_eq!(frames[0].id, decided.id);
    assert_eq!(frames[1].json()["reason"], "session_ended");
    assert_eq!(frames[2].json()["reason"], "session_deleted");
    let ids: Vec<u64> = frames.iter().map(seq).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");

    // A fresh snapshot now lists nothing, at the feed's newest id.
    let mut fresh = server.approval_feed("", None).await;
    let snapshot = fresh.frame(WAIT).await.unwrap();
    assert_eq!(snapshot.json()["items"], json!([]));
    assert_eq!(seq(&snapshot), ids[2]);

    // The app filter: another app's feed sees none of it, and a new request
    // of ops reaches only the ops feed.
    let (status, body) = server.get("/approvals/events?app=nope").await;
    assert_eq!(status, 404, "{body}");
    let mut ops = server
        .approval_feed("?app=ops", Some(&ids[2].to_string()))
        .await;
    let d = awaiting(&server, "d").await;
    let next = ops.frame(WAIT).await.unwrap();
    assert_eq!(summary(&next).1, d);
    assert_eq!(seq(&next), ids[2] + 1);

    // Ids that are not the feed's.
    for bad in ["abc", "-1", "999999999"] {
        let (status, body) = server
            .get(&format!("/approvals/events?last_event_id={bad}"))
            .await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body["error"]["code"], "unknown_event_id", "{body}");
    }
}

#[tokio::test]
async fn the_snapshot_carries_at_most_its_bound_and_says_there_are_more() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--approvals-snapshot-max", "2"]).await;
    deploy_ops(&server).await;
    let mut pending = Vec::new();
    for name in ["a", "b", "c"] {
        pending.push(awaiting(&server, name).await);
    }
    let mut feed = server.approval_feed("", None).await;
    let snapshot = feed.frame(WAIT).await.unwrap();
    assert_eq!(snapshot.event.as_deref(), Some("APPROVALS_SNAPSHOT"));
    let data = snapshot.json();
    let items = data["items"].as_array().unwrap();
    let sessions: Vec<_> = (items.iter())
        .map(|item| item["session"]["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        sessions,
        [&pending[0], &pending[1]],
        "the oldest two: {data}"
    );
    assert_eq!(data["more"], true, "{data}");
    // The rest is paged from GET /approvals after the last item.
    let last = items[1]["event"]["id"].as_str().unwrap();
    let (status, page) = server.get(&format!("/approvals?cursor={last}")).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        page["items"][0]["session"]["session_id"],
        pending[2].as_str(),
        "{page}"
    );
    // Live changes still come after the snapshot.
    let d = awaiting(&server, "d").await;
    let next = feed.frame(WAIT).await.unwrap();
    assert_eq!(summary(&next).1, d);

    // Under the bound, `more` is false.
    for session in &pending[..3] {
        let (status, body) = server
            .post(&format!("/sessions/{session}/end"), json!({}))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let mut fresh = server.approval_feed("", None).await;
    let snapshot = fresh.frame(WAIT).await.unwrap().json();
    assert_eq!(
        snapshot["items"].as_array().map(Vec::len),
        Some(1),
        "{snapshot}"
    );
    assert_eq!(snapshot["more"], false, "{snapshot}");
}
