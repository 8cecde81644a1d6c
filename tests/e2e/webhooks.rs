//! Webhooks end to end: a real local receiver (tests/webhooks/receiver.py,
//! through `AGENTHOST_TEST_WEBHOOKS_PYTHON`) verifies every delivery with
//! the Standard Webhooks reference library from PyPI. Each event type
//! delivered once per event; a receiver answering 500 three times gets the
//! same `webhook-id` until it answers 200; a delivery committed before a
//! `kill -9` delivered after the restart; a 410 disables the endpoint; a
//! rotation's grace signs with both secrets; the pending cap (turn events
//! past it never silence an approval); decision
//! links (GET decides nothing, POST once, then 409; forged and expired
//! links refused, a rotation and the links' own lifetime end them; their
//! security headers; the deciding address hashed into the decision).
//! Retries are fast: `--webhook-retry-base 100ms`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{self, Server, bundle, leaks};

pub(crate) const FAST: &[&str] = &["--allow-private-webhooks", "--webhook-retry-base", "100ms"];
const DEADLINE: Duration = Duration::from_secs(60);

/// The receiver, killed when dropped.
pub(crate) struct Receiver {
    child: Child,
    pub(crate) url: String,
    client: reqwest::Client,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    /// Starts on `port` (0: any).
    fn start_on(port: u16) -> Receiver {
        let python = std::env::var_os("AGENTHOST_TEST_WEBHOOKS_PYTHON").unwrap_or_else(|| {
            panic!(
                "AGENTHOST_TEST_WEBHOOKS_PYTHON is not set: the webhook tests verify with the \
                 standardwebhooks library (run scripts/test, or `source scripts/prereqs/56-webhooks.sh`)"
            )
        });
        let script = support::workspace().join("tests/webhooks/receiver.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the receiver");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("its port");
        Receiver {
            child,
            url: format!("http://127.0.0.1:{}", line.trim()),
            client: support::client(),
        }
    }

    pub(crate) fn start() -> Receiver {
        Receiver::start_on(0)
    }

    /// Tells the receiver how to check and answer deliveries to `path`.
    pub(crate) async fn config(
        &self,
        path: &str,
        secrets: &[&str],
        fail: u32,
        fail_status: u16,
        status: u16,
    ) {
        let body = json!({"path": path, "secrets": secrets, "fail": fail,
                          "fail_status": fail_status, "status": status});
        let response = (self.client.post(format!("{}/_config", self.url)))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 204);
    }

    /// Every delivery to `path` so far.
    pub(crate) async fn log(&self, path: &str) -> Vec<Value> {
        let response = self.client.get(format!("{}/_log", self.url)).send();
        let log: Vec<Value> = response.await.unwrap().json().await.unwrap();
        log.into_iter().filter(|d| d["path"] == path).collect()
    }

    /// Waits until `done` holds of the deliveries to `path`.
    pub(crate) async fn wait(
        &self,
        path: &str,
        what: &str,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let log = self.log(path).await;
            if done(&log) {
                return log;
            }
            assert!(started.elapsed() < DEADLINE, "{what}: {log:#?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Creates an endpoint; returns its id and secret.
pub(crate) async fn create(server: &Server, body: Value) -> (String, String) {
    let (status, created) = server.post("/webhooks", body).await;
    assert_eq!(status, 201, "{created}");
    let secret = created["secret"].as_str().unwrap().to_string();
    leaks::used("webhook secret", &secret);
    assert!(secret.starts_with("whsec_"), "{created}");
    (created["id"].as_str().unwrap().to_string(), secret)
}

fn of_type<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|d| d["body"]["type"] == kind).collect()
}

pub(crate) async fn deliveries(server: &Server, webhook: &str) -> Vec<Value> {
    let (status, page) = server
        .get(&format!("/webhooks/{webhook}/deliveries?limit=500"))
        .await;
    assert_eq!(status, 200, "{page}");
    page["items"].as_array().unwrap().clone()
}

const ALL: [&str; 8] = [
    "approval.requested",
    "approval.decided",
    "approval.expired",
    "turn.ended",
    "turn.failed",
    "session.ended",
    "deployment.succeeded",
    "deployment.failed",
];

/// Deploys the ops example as `slug` (its approvals expire after
/// `timeout_secs` when given).
pub(crate) async fn deploy_ops(server: &Server, slug: &str, timeout_secs: Option<u64>) {
    let limits = timeout_secs
        .map(|secs| format!("[limits]\napproval_timeout_secs = {secs}\n"))
        .unwrap_or_default();
    let manifest = format!("[app]\nslug = \"{slug}\"\n[agent]\nentry = \"ops.wasm\"\n{limits}");
    let component = support::guest("ops");
    let (status, row) = server
        .upload(bundle(&[("ops.wasm", &component)]), &manifest)
        .await;
    assert_eq!(status, 202, "{row}");
    assert_eq!(server.wait_built(&row).await["status"], "active");
}

/// Runs a session of ops to its gated call; returns the session.
pub(crate) async fn suspended(server: &Server, app: &str) -> String {
    let session = server.session(app, "/ops", json!("delete apples")).await;
    let events = (server.events(&session, None).await)
        .until(&["TOOL_APPROVAL_REQUIRED", "TURN_ENDED", "TURN_ERROR"])
        .await;
    assert_eq!(events.last().unwrap()["type"], "TOOL_APPROVAL_REQUIRED");
    session
}

#[tokio::test]
async fn every_event_type_is_delivered_once_per_event_and_verifies() {
    let receiver = Receiver::start();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), FAST).await;
    let url = format!("{}/all", receiver.url);
    let (id, secret) = create(&server, json!({"url": url, "events": ALL})).await;
    receiver.config("/all", &[&secret], 0, 500, 200).await;

    // deployment.succeeded, deployment.failed.
    deploy_ops(&server, "ops", None).await;
    deploy_ops(&server, "expiring", Some(1)).await;
    server.deploy("rogue", &support::guest("rogue")).await;
    let manifest = "[app]\nslug = \"broken\"\n[agent]\nentry = \"agent.wasm\"\n";
    let trap = support::guest("describe-trap");
    let (status, row) = server
        .upload(bundle(&[("agent.wasm", &trap)]), manifest)
        .await;
    assert_eq!(status, 202);
    assert_eq!(server.wait_built(&row).await["status"], "failed");
    // approval.requested, approval.decided, then the resumed turn's turn.ended.
    let decided = suspended(&server, "ops").await;
    let (status, body) = server
        .post(
            &format!("/sessions/{decided}/approval"),
            json!({"approved": true, "approver": "ana"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    server
        .events(&decided, None)
        .await
        .until(&["TURN_ENDED"])
        .await;
    // session.ended.
    assert_eq!(
        server
            .post(&format!("/sessions/{decided}/end"), json!({}))
            .await
            .0,
        200
    );
    // turn.failed.
    let failed = server.session("rogue", "/trap", json!("x")).await;
    server
        .events(&failed, None)
        .await
        .until(&["TURN_ERROR"])
        .await;
    // approval.requested and approval.expired (a 1 s deadline).
    let expired = suspended(&server, "expiring").await;

    let expected = [
        ("deployment.succeeded", 3),
        ("deployment.failed", 1),
        ("approval.requested", 2),
        ("approval.decided", 1),
        ("approval.expired", 1),
        ("turn.ended", 2), // the resumed turn and the expired call's resumed turn
        ("turn.failed", 1),
        ("session.ended", 1),
    ];
    let total: usize = expected.iter().map(|(_, n)| n).sum();
    let log = receiver
        .wait("/all", "every event", |log| {
            expected
                .iter()
                .all(|(kind, n)| of_type(log, kind).len() >= *n)
        })
        .await;
    // Nothing is pending any more, and each delivery came once.
    let started = Instant::now();
    let stored = loop {
        let stored = deliveries(&server, &id).await;
        if stored.iter().all(|d| d["state"] == "delivered") {
            break stored;
        }
        assert!(started.elapsed() < DEADLINE, "{stored:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    drop(log);
    let log = receiver.log("/all").await;
    assert_eq!(stored.len(), total, "{stored:#?}");
    assert_eq!(log.len(), total, "{log:#?}");
    for (kind, n) in expected {
        assert_eq!(of_type(&log, kind).len(), n, "{kind}: {log:#?}");
    }
    let mut ids: Vec<&str> = log.iter().map(|d| d["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), total, "one webhook-id per event");
    for delivery in &log {
        assert_eq!(
            delivery["verified"],
            json!([0]),
            "the reference verifier: {delivery}"
        );
    }
    for delivery in &stored {
        assert_eq!(delivery["attempt_count"], 1, "{delivery}");
        assert_eq!(delivery["attempts"][0]["status"], 200);
    }

    // The payloads: ids, a summary, and for approvals the tool, arguments, reason.
    let requested = of_type(&log, "approval.requested");
    let data = &requested[0]["body"]["data"];
    assert_eq!(data["session_id"], decided);
    assert_eq!(data["app"], "ops");
    assert_eq!(data["tool"], "delete_record");
    assert_eq!(data["arguments"], json!({"name": "apples"}));
    assert!(
        data["reason"]
            .as_str()
            .unwrap()
            .contains("the user asked to"),
        "{data}"
    );
    assert!(
        data["summary"].as_str().unwrap().contains("delete_record"),
        "{data}"
    );
    assert!(
        data.get("links").is_none(),
        "no links unless asked for: {data}"
    );
    let decision = &of_type(&log, "approval.decided")[0]["body"]["data"];
    assert_eq!(
        (decision["approved"].clone(), decision["approver"].clone()),
        (json!(true), json!("ana"))
    );
    let timeout = &of_type(&log, "approval.expired")[0]["body"]["data"];
    assert_eq!(timeout["session_id"], expired);
    assert_eq!(timeout["approved"], false);
    let failure = &of_type(&log, "turn.failed")[0]["body"]["data"];
    assert_eq!(failure["session_id"], failed);
    assert_eq!(failure["kind"], "trap");
    let broken = &of_type(&log, "deployment.failed")[0]["body"]["data"];
    assert_eq!(broken["app"], "broken");
    assert!(broken["error"].as_str().is_some(), "{broken}");

    // Counted by outcome.
    let text = server.metrics().await;
    assert!(
        text.contains(&format!(
            "agenthost_webhook_attempts_total{{outcome=\"delivered\"}} {total}"
        )),
        "{text}"
    );
}

#[tokio::test]
async fn a_failing_receiver_gets_the_same_webhook_id_until_it_answers() {
    let receiver = Receiver::start();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), FAST).await;
    let url = format!("{}/flaky", receiver.url);
    let (id, secret) = create(
        &server,
        json!({"url": url, "events": ["deployment.succeeded"]}),
    )
    .await;
    receiver.config("/flaky", &[&secret], 3, 500, 200).await;
    server.deploy("hello", &support::guest("hello")).await;

    let log = receiver
        .wait("/flaky", "four attempts", |log| {
            log.iter().any(|d| d["answered"] == 200)
        })
        .await;
    let answered: Vec<&Value> = log.iter().map(|d| &d["answered"]).collect();
    assert_eq!(
        answered,
        [&json!(500), &json!(500), &json!(500), &json!(200)]
    );
    assert!(
        log.iter().all(|d| d["id"] == log[0]["id"]),
        "one webhook-id: {log:#?}"
    );
    assert!(log.iter().all(|d| d["verified"] == json!([0])), "{log:#?}");
    let stored = deliveries(&server, &id).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["id"], log[0]["id"]);
    assert_eq!(stored[0]["state"], "delivered");
    assert_eq!(stored[0]["attempt_count"], 4);
    let statuses: Vec<&Value> = (stored[0]["attempts"].as_array().unwrap().iter())
        .map(|a| &a["status"])
        .collect();
    assert_eq!(
        statuses,
        [&json!(500), &json!(500), &json!(500), &json!(200)]
    );
    // The answer's body is kept (truncated).
    assert_eq!(
        stored[0]["attempts"][3]["body"],
        "received by the test receiver"
    );

    // Resent by hand: the same id once more.
    let delivery = stored[0]["id"].as_str().unwrap();
    let (status, body) = server
        .post(
            &format!("/webhooks/{id}/deliveries/{delivery}/resend"),
            json!({}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let log = receiver
        .wait("/flaky", "the resend", |log| log.len() == 5)
        .await;
    assert_eq!(log[4]["id"], delivery);
    assert_eq!(log[4]["answered"], 200);
}

#[tokio::test]
async fn a_delivery_committed_before_a_kill_9_is_delivered_after_the_restart() {
    // A port with nothing on it yet: every attempt before the kill fails.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), FAST).await;
    let url = format!("http://127.0.0.1:{port}/late");
    let (id, secret) = create(
        &server,
        json!({"url": url, "events": ["deployment.succeeded"]}),
    )
    .await;
    server.deploy("hello", &support::guest("hello")).await;
    let before = deliveries(&server, &id).await;
    assert_eq!(before.len(), 1, "recorded with the event's commit");
    assert_eq!(before[0]["state"], "pending");
    server.kill();

    let receiver = Receiver::start_on(port);
    receiver.config("/late", &[&secret], 0, 500, 200).await;
    let server = Server::start_with(dir.path(), FAST).await;
    let log = receiver
        .wait("/late", "the delivery", |log| !log.is_empty())
        .await;
    assert_eq!(log[0]["id"], before[0]["id"], "the same delivery");
    assert_eq!(log[0]["verified"], json!([0]));
    assert_eq!(log[0]["body"]["type"], "deployment.succeeded");
    let started = Instant::now();
    while deliveries(&server, &id).await[0]["state"] != "delivered" {
        assert!(started.elapsed() < DEADLINE);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_410_disables_the_endpoint() {
    let receiver = Receiver::start();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), FAST).await;
    let events = json!(["deployment.succeeded"]);
    let (gone, secret) = create(
        &server,
        json!({"url": format!("{}/gone", receiver.url), "events": events}),
    )
    .await;
    let (_, other) = create(
        &server,
        json!({"url": format!("{}/other", receiver.url), "events": events}),
    )
    .await;
    receiver.config("/gone", &[&secret], 0, 500, 410).await;
    receiver.config("/other", &[&other], 0, 500, 200).await;
    server.deploy("hello", &support::guest("hello")).await;
    receiver
        .wait("/gone", "the 410", |log| log.len() == 1)
        .await;
    let started = Instant::now();
    loop {
        let (_, endpoint) = server.get(&format!("/webhooks/{gone}")).await;
        if endpoint["disabled"].is_string() {
            break;
        }
        assert!(started.elapsed() < DEADLINE, "{endpoint}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The next event reaches the other endpoint, not the disabled one.
    server.deploy("hello", &support::guest("hello")).await;
    receiver
        .wait("/other", "both events", |log| log.len() == 2)
        .await;
    assert_eq!(receiver.log("/gone").await.len(), 1);
    assert_eq!(
        deliveries(&server, &gone).await.len(),
        1,
        "nothing recorded for it"
    );
}

#[tokio::test]
async fn a_rotation_signs_with_both_secrets_during_its_grace() {
    let receiver = Receiver::start();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), FAST).await;
    let url = format!("{}/rotated", receiver.url);
    let (id, first) = create(
        &server,
        json!({"url": url, "events": ["deployment.succeeded"]}),
    )
    .await;
    let (status, rotated) = server
        .post(
            &format!("/webhooks/{id}/rotate"),
            json!({"grace_secs": 3600}),
        )
        .await;
    assert_eq!(status, 200, "{rotated}");
    let second = rotated["secret"].as_str().unwrap().to_string();
    leaks::used("webhook secret", &second);
    assert_ne!(first, second);
    receiver
        .config("/rotated", &[&first, &second], 0, 500, 200)
        .await;
    server.deploy("hello", &support::guest("hello")).await;
    let log = receiver.wait("/rotated", "one", |log| log.len() == 1).await;
    assert_eq!(
        log[0]["verified"],
        json!([0, 1]),
        "both verify during the grace"
    );

    // No grace: only the newest signs.
    let (status, rotated) = server
        .post(&format!("/webhooks/{id}/rotate"), json!({"grace_secs": 0}))
        .await;
    assert_eq!(status, 200);
    let third = rotated["secret"].as_str().unwrap().to_string();
    leaks::used("webhook secret", &third);
    receiver
        .config("/rotated", &[&first, &second, &third], 0, 500, 200)
        .await;
    server.deploy("hello", &support::guest("hello")).await;
    let log = receiver.wait("/rotated", "two", |log| log.len() == 2).await;
    assert_eq!(log[1]["verified"], json!([2]));
    // The secret is never shown again.
    let (_, shown) = server.get(&format!("/webhooks/{id}")).await;
    assert!(shown.get("secret").is_none(), "{shown}");
}

#[tokio::test]
async fn an_endpoint_at_its_pending_cap_records_no_more() {
    let dir = support::data_dir();
    let flags = [FAST, &["--webhook-max-pending", "2"]].concat();
    let server = Server::start_with(dir.path(), &flags).await;
    // TEST-NET-1 (RFC 5737) is never routed: nothing there ever answers,
    // and the deliveries stay pending.
    let url = "http://192.0.2.1:9/nobody";
    let (id, _) = create(
        &server,
        json!({"url": url, "events": ["deployment.succeeded"]}),
    )
    .await;
    for _ in 0..4 {
        server.deploy("hello", &support::guest("hello")).await;
    }
    let stored = deliveries(&server, &id).await;
    assert_eq!(stored.len(), 2, "{stored:#?}");
    assert!(stored.iter().all(|d| d["state"] == "pending"));
    let text = server.metrics().await;
    let dropped = r#"agenthost_webhook_dropped_total{event="deployment.succeeded"}"#;
    assert_eq!(support::sample(&text, dropped), 2.0, "{text}");
}

/// The review's N3 with a smaller cap: an endpoint full of `turn.ended`
/// (a receiver answering 503, so they stay pending) still records the
/// operator's `approval.requested`, which is delivered first once the
/// receiver answers; the turn events past the cap are counted by type.
#[tokio::test]
async fn turn_events_past_the_cap_never_silence_an_approval() {
    let receiver = Receiver::start();
    let dir = support::data_dir();
    let flags = [FAST, &["--webhook-max-pending", "4"]].concat();
    let server = Server::start_with(dir.path(), &flags).await;
    deploy_ops(&server, "ops", None).await;
    server.deploy("hello", &support::guest("hello")).await;
    let url = format!("{}/noisy", receiver.url);
    let events = ["turn.ended", "approval.requested"];
    let (id, secret) = create(&server, json!({"url": url, "events": events})).await;
    receiver.config("/noisy", &[&secret], 0, 500, 503).await;

    // Ten quick turns: four fill the endpoint, six are shed.
    for i in 0..10 {
        server
            .session("hello", "/chat", json!(format!("turn {i}")))
            .await;
    }
    let turn_dropped = r#"agenthost_webhook_dropped_total{event="turn.ended"}"#;
    let started = Instant::now();
    while support::sample(&server.metrics().await, turn_dropped) < 6.0 {
        assert!(started.elapsed() < DEADLINE, "the turns never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The approval is recorded for the full endpoint (in the event's commit).
    let session = suspended(&server, "ops").await;
    let stored = deliveries(&server, &id).await;
    assert!(
        stored
            .iter()
            .any(|d| d["event_type"] == "approval.requested"),
        "the approval was dropped: {stored:#?}"
    );
    let text = server.metrics().await;
    let approval_dropped = r#"agenthost_webhook_dropped_total{event="approval.requested"}"#;
    assert_eq!(support::sample(&text, approval_dropped), 0.0, "{text}");
    assert_eq!(support::sample(&text, turn_dropped), 6.0, "{text}");

    // The receiver recovers: the approval arrives, verified.
    receiver.config("/noisy", &[&secret], 0, 500, 200).await;
    let log = receiver
        .wait("/noisy", "the approval", |log| {
            of_type(log, "approval.requested")
                .iter()
                .any(|d| d["answered"] == 200)
        })
        .await;
    let approval = of_type(&log, "approval.requested")[0];
    assert_eq!(approval["verified"], json!([0]));
    assert_eq!(approval["body"]["data"]["session_id"], session);
}

#[tokio::test]
async fn endpoints_are_checked() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    for (body, code) in [
        (
            json!({"url": "http://127.0.0.1:9/x", "events": ["turn.ended"]}),
            422,
        ),
        (
            json!({"url": "https://127.0.0.1:9/x", "events": ["turn.ended"]}),
            422,
        ),
        (json!({"url": "https://example.com/x", "events": []}), 422),
        (
            json!({"url": "https://example.com/x", "events": ["nope"]}),
            422,
        ),
        (
            json!({"url": "https://example.com/x", "events": ["turn.ended"], "app": "nope"}),
            404,
        ),
    ] {
        let (status, answer) = server.post("/webhooks", body.clone()).await;
        assert_eq!(status, code, "{body}: {answer}");
    }
    let (id, _) = create(
        &server,
        json!({"url": "https://example.com/x", "events": ["turn.ended"]}),
    )
    .await;
    let (_, list) = server.get("/webhooks").await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(server.delete(&format!("/webhooks/{id}")).await, 204);
    assert_eq!(server.delete(&format!("/webhooks/{id}")).await, 404);
    assert_eq!(server.get(&format!("/webhooks/{id}")).await.0, 404);
}

/// The decision links of the one `approval.requested` to `path`.
pub(crate) async fn links(receiver: &Receiver, path: &str, session: &str) -> (String, String) {
    let log = receiver
        .wait(path, "the request", |log| {
            log.iter().any(|d| {
                d["body"]["type"] == "approval.requested"
                    && d["body"]["data"]["session_id"] == session
            })
        })
        .await;
    let request = log
        .iter()
        .find(|d| d["body"]["data"]["session_id"] == session)
        .unwrap();
    assert_eq!(request["verified"], json!([0]));
    let links = &request["body"]["data"]["links"];
    (
        links["approve"].as_str().unwrap().to_string(),
        links["deny"].as_str().unwrap().to_string(),
    )
}

async fn status_of(server: &Server, session: &str) -> String {
    let (_, body) = server.get(&format!("/sessions/{session}")).await;
    body["status"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn decision_links_decide_once_by_post_only() {
    let receiver = Receiver::start();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), FAST).await;
    deploy_ops(&server, "ops", None).await;
    let url = format!("{}/links", receiver.url);
    let events = ["approval.requested", "approval.decided"];
    let body = json!({"url": url, "events": events, "decision_links": true});
    let (id, secret) = create(&server, body).await;
    receiver.config("/links", &[&secret], 0, 500, 200).await;
    let session = suspended(&server, "ops").await;
    let (approve, deny) = links(&receiver, "/links", &session).await;
    assert!(
        approve.starts_with(&server.url("/decision-links?t=")),
        "{approve}"
    );
    leaks::used("decision link", approve.split("t=").nth(1).unwrap());
    leaks::used("decision link", deny.split("t=").nth(1).unwrap());
    let anonymous = reqwest::Client::new();

    // The links' own end (24 h by default) comes with them.
    let log = receiver.log("/links").await;
    let expires_at = log[0]["body"]["data"]["links"]["expires_at"]
        .as_str()
        .unwrap_or_else(|| panic!("no expires_at: {log:#?}"));
    let expires_at = humantime::parse_rfc3339(expires_at).unwrap();
    let left = expires_at
        .duration_since(std::time::SystemTime::now())
        .unwrap();
    assert!(left > Duration::from_secs(23 * 3600) && left <= Duration::from_secs(24 * 3600));

    // GET shows a page and decides nothing (a link preview).
    for link in [&approve, &deny] {
        let page = anonymous.get(link).send().await.unwrap();
        assert_eq!(page.status(), 200);
        assert_link_headers(&page);
        let text = page.text().await.unwrap();
        assert!(
            text.contains("delete_record") && text.contains("<form method=\"post\""),
            "{text}"
        );
    }
    assert_eq!(status_of(&server, &session).await, "awaiting_approval");

    // A forged link (the deny claim under the approve signature) is refused.
    let (claim, _) = deny.split("t=").nth(1).unwrap().split_once('.').unwrap();
    let (_, signature) = approve.split("t=").nth(1).unwrap().split_once('.').unwrap();
    let forged = server.url(&format!("/decision-links?t={claim}.{signature}"));
    assert_eq!(anonymous.post(&forged).send().await.unwrap().status(), 404);
    assert_eq!(status_of(&server, &session).await, "awaiting_approval");

    // POST decides, once; the other link and a second use are 409.
    let decided = anonymous.post(&approve).send().await.unwrap();
    assert_eq!(decided.status(), 200);
    assert_link_headers(&decided);
    let again = anonymous.post(&approve).send().await.unwrap();
    assert_eq!(again.status(), 409);
    assert_link_headers(&again);
    assert_eq!(anonymous.post(&deny).send().await.unwrap().status(), 409);
    assert_eq!(anonymous.get(&approve).send().await.unwrap().status(), 409);
    let events = server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED"])
        .await;
    let granted = events
        .iter()
        .find(|e| e["type"] == "TOOL_APPROVAL_GRANTED")
        .unwrap();
    assert_eq!(granted["payload"]["approver"], format!("webhook:{id}"));
    // The deciding request's address, as a keyed hash (32 hex digits).
    let hash = granted["payload"]["address_hash"]
        .as_str()
        .unwrap_or_default();
    assert!(
        hash.len() == 32 && hash.chars().all(|c| c.is_ascii_hexdigit()),
        "{granted}"
    );
    assert!(!granted.to_string().contains("127.0.0.1"), "{granted}");
    let log = receiver
        .wait("/links", "the decision", |log| {
            !of_type(log, "approval.decided").is_empty()
        })
        .await;
    assert_eq!(
        of_type(&log, "approval.decided")[0]["body"]["data"]["approver"],
        format!("webhook:{id}")
    );

    // Links die with their endpoint.
    let next = suspended(&server, "ops").await;
    let (approve, _) = links(&receiver, "/links", &next).await;
    leaks::used("decision link", approve.split("t=").nth(1).unwrap());
    assert_eq!(server.delete(&format!("/webhooks/{id}")).await, 204);
    assert_eq!(anonymous.post(&approve).send().await.unwrap().status(), 404);
    assert_eq!(status_of(&server, &next).await, "awaiting_approval");
}

/// A pending approval that will never be decided (its session ended or
/// was deleted) is announced as `approval.withdrawn`, naming the call.
#[tokio::test]
async fn a_withdrawn_approval_is_announced() {
    let receiver = Receiver::start();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), FAST).await;
    deploy_ops(&server, "ops", None).await;
    let url = format!("{}/withdrawn", receiver.url);
    let body = json!({"url": url, "events": ["approval.withdrawn"]});
    let (_, secret) = create(&server, body).await;
    receiver.config("/withdrawn", &[&secret], 0, 500, 200).await;
    let ended = suspended(&server, "ops").await;
    let deleted = suspended(&server, "ops").await;
    let (status, body) = server
        .post(&format!("/sessions/{ended}/end"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(server.delete(&format!("/sessions/{deleted}")).await, 204);
    let log = receiver
        .wait("/withdrawn", "both withdrawals", |log| log.len() >= 2)
        .await;
    for (session, reason) in [(&ended, "session_ended"), (&deleted, "session_deleted")] {
        let delivery = log
            .iter()
            .find(|d| d["body"]["data"]["session_id"] == **session)
            .unwrap_or_else(|| panic!("no withdrawal of {session}: {log:#?}"));
        assert_eq!(delivery["verified"], json!([0]));
        let data = &delivery["body"]["data"];
        assert_eq!(delivery["body"]["type"], "approval.withdrawn");
        assert_eq!(data["reason"], reason, "{data}");
        assert_eq!(data["tool"], "delete_record", "{data}");
        assert!(
            (data["summary"].as_str().unwrap_or_default()).contains("will never be decided"),
            "{data}"
        );
    }
    assert_eq!(log.len(), 2, "one delivery per withdrawal: {log:#?}");
}

/// The security headers of every answer to a decision link.
fn assert_link_headers(response: &reqwest::Response) {
    let headers = response.headers();
    assert_eq!(
        headers["content-security-policy"],
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
    );
    assert_eq!(headers["referrer-policy"], "no-referrer");
    assert_eq!(headers["x-frame-options"], "DENY");
}

/// The review's N8: a rotation of the endpoint's secret revokes the links
/// it gave (410, the call still pending); the next approval's links work.
#[tokio::test]
async fn a_rotation_revokes_the_decision_links_sent_before() {
    let receiver = Receiver::start();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), FAST).await;
    deploy_ops(&server, "ops", None).await;
    let url = format!("{}/rotated-links", receiver.url);
    let body = json!({"url": url, "events": ["approval.requested"], "decision_links": true});
    let (id, secret) = create(&server, body).await;
    receiver
        .config("/rotated-links", &[&secret], 0, 500, 200)
        .await;
    let session = suspended(&server, "ops").await;
    let (approve, deny) = links(&receiver, "/rotated-links", &session).await;
    leaks::used("decision link", approve.split("t=").nth(1).unwrap());
    leaks::used("decision link", deny.split("t=").nth(1).unwrap());
    let (status, rotated) = server
        .post(
            &format!("/webhooks/{id}/rotate"),
            json!({"grace_secs": 3600}),
        )
        .await;
    assert_eq!(status, 200, "{rotated}");
    let second = rotated["secret"].as_str().unwrap().to_string();
    leaks::used("webhook secret", &second);
    let anonymous = reqwest::Client::new();
    for link in [&approve, &deny] {
        let page = anonymous.get(link).send().await.unwrap();
        assert_eq!(page.status(), 410);
        assert_link_headers(&page);
        let refused = anonymous.post(link).send().await.unwrap();
        assert_eq!(refused.status(), 410);
        let body: Value = refused.json().await.unwrap();
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("rotated"),
            "{body}"
        );
    }
    assert_eq!(status_of(&server, &session).await, "awaiting_approval");
    // The next approval's links are of the new generation.
    receiver
        .config("/rotated-links", &[&second], 0, 500, 200)
        .await;
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/approval"),
            json!({"approved": false, "approver": "ana"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED"])
        .await;
    let next = suspended(&server, "ops").await;
    let (approve, _) = links(&receiver, "/rotated-links", &next).await;
    leaks::used("decision link", approve.split("t=").nth(1).unwrap());
    assert_eq!(anonymous.post(&approve).send().await.unwrap().status(), 200);
}

/// The review's N8: a link decides for `--decision-link-ttl` only, even
/// when the approval has no deadline.
#[tokio::test]
async fn a_decision_link_ends_with_its_own_lifetime() {
    let receiver = Receiver::start();
    let dir = support::data_dir();
    let flags = [FAST, &["--decision-link-ttl", "1s"]].concat();
    let server = Server::start_with(dir.path(), &flags).await;
    deploy_ops(&server, "ops", None).await;
    let url = format!("{}/short-links", receiver.url);
    let body = json!({"url": url, "events": ["approval.requested"], "decision_links": true});
    let (_, secret) = create(&server, body).await;
    receiver
        .config("/short-links", &[&secret], 0, 500, 200)
        .await;
    let session = suspended(&server, "ops").await;
    let (approve, _) = links(&receiver, "/short-links", &session).await;
    leaks::used("decision link", approve.split("t=").nth(1).unwrap());
    let log = receiver.log("/short-links").await;
    let expires_at = log[0]["body"]["data"]["links"]["expires_at"]
        .as_str()
        .unwrap();
    let expires_at = humantime::parse_rfc3339(expires_at).unwrap();
    if let Ok(left) = expires_at.duration_since(std::time::SystemTime::now()) {
        tokio::time::sleep(left + Duration::from_millis(100)).await;
    }
    let anonymous = reqwest::Client::new();
    let refused = anonymous.post(&approve).send().await.unwrap();
    assert_eq!(refused.status(), 410);
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--decision-link-ttl"),
        "{body}"
    );
    assert_eq!(status_of(&server, &session).await, "awaiting_approval");
}

#[tokio::test]
async fn an_expired_decision_link_decides_nothing() {
    let receiver = Receiver::start();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), FAST).await;
    deploy_ops(&server, "ops", Some(1)).await;
    let url = format!("{}/late-links", receiver.url);
    let events = ["approval.requested", "approval.expired"];
    let body = json!({"url": url, "events": events, "decision_links": true});
    let (_, secret) = create(&server, body).await;
    receiver
        .config("/late-links", &[&secret], 0, 500, 200)
        .await;
    let session = suspended(&server, "ops").await;
    let (approve, _) = links(&receiver, "/late-links", &session).await;
    leaks::used("decision link", approve.split("t=").nth(1).unwrap());
    receiver
        .wait("/late-links", "the expiry", |log| {
            !of_type(log, "approval.expired").is_empty()
        })
        .await;
    let anonymous = reqwest::Client::new();
    let status = anonymous.post(&approve).send().await.unwrap().status();
    assert!(status == 410 || status == 409, "{status}");
    let events = server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    let denied = events
        .iter()
        .find(|e| e["type"] == "TOOL_APPROVAL_DENIED")
        .unwrap();
    assert_eq!(denied["payload"]["approver"], "timeout");
    assert!(events.iter().all(|e| e["type"] != "TOOL_APPROVAL_GRANTED"));
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_at_delivery() {
    // Without --allow-private-webhooks. Anything connecting here is counted.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--webhook-retry-base", "100ms"]).await;
    let url = format!("https://localhost:{port}/hook");
    let (id, _) = create(
        &server,
        json!({"url": url, "events": ["deployment.succeeded"]}),
    )
    .await;
    server.deploy("hello", &support::guest("hello")).await;
    let started = Instant::now();
    let stored = loop {
        let stored = deliveries(&server, &id).await;
        if stored[0]["attempt_count"].as_u64().unwrap_or(0) >= 2 {
            break stored;
        }
        assert!(started.elapsed() < DEADLINE, "{stored:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let error = stored[0]["attempts"][0]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("--allow-private-webhooks"), "{stored:#?}");
    assert_eq!(stored[0]["state"], "pending", "retried, never sent");
    let accepted = listener.accept();
    assert!(
        matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "nothing connected: {accepted:?}"
    );
    assert!(
        server
            .metrics()
            .await
            .contains("agenthost_webhook_attempts_total{outcome=\"refused\"}")
    );
}

#[tokio::test]
async fn an_exit_right_after_the_events_commit_loses_no_delivery() {
    let receiver = Receiver::start();
    let dir = support::data_dir();
    let env = [
        ("AGENTHOST_ALLOW_PRIVATE_WEBHOOKS", "true"),
        ("AGENTHOST_WEBHOOK_RETRY_BASE", "100ms"),
    ];
    let server = Server::start_with_env(dir.path(), &env).await;
    let url = format!("{}/ended", receiver.url);
    let (_, secret) = create(&server, json!({"url": url, "events": ["session.ended"]})).await;
    receiver.config("/ended", &[&secret], 0, 500, 200).await;
    server.deploy("hello", &support::guest("hello")).await;
    let session = server.session("hello", "/chat", json!("hi")).await;
    server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED"])
        .await;
    drop(server);

    // The process exits (137, as killed) as soon as SESSION_ENDED is committed.
    let exiting = [env[0], env[1], ("AGENTHOST_TEST_EXIT_AFTER_COMMIT", "/end")];
    let mut server = Server::start_with_env(dir.path(), &exiting).await;
    let sent = (server
        .client
        .post(server.url(&format!("/sessions/{session}/end"))))
    .bearer_auth(support::KEY)
    .json(&json!({}))
    .send()
    .await;
    assert!(sent.is_err(), "answered: {sent:?}");
    assert_eq!(
        server.wait_exit(Duration::from_secs(30)).await.code(),
        Some(137)
    );
    drop(server);

    let _server = Server::start_with_env(dir.path(), &env).await;
    let log = receiver
        .wait("/ended", "the end", |log| !log.is_empty())
        .await;
    assert_eq!(log[0]["body"]["data"]["session_id"], session);
    assert_eq!(log[0]["verified"], json!([0]));
}
