//! Outbound HTTP: the manifest's allowlist within the operator's ceiling,
//! private addresses refused unless the operator allows them, and every
//! request on the record (never its query, headers or body; a secret in its
//! origin, method or refusal reason redacted).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::hold::Hold;
use crate::support::{self, Server, bundle, types};

/// A local upstream: `/hang` never answers, anything else answers `hello`;
/// counts every request.
struct Upstream {
    origin: String,
    hits: Arc<AtomicUsize>,
}

async fn upstream() -> Upstream {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            if uri.path() == "/hang" {
                std::future::pending::<()>().await;
            }
            "hello"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Upstream { origin, hits }
}

async fn deploy_fetch(server: &Server, allow: &[&str]) -> Value {
    deploy_fetch_with(server, allow, "").await
}

async fn deploy_fetch_with(server: &Server, allow: &[&str], extra: &str) -> Value {
    let manifest = format!(
        "[app]\nslug = \"fetch\"\n[agent]\nentry = \"agent.wasm\"\n[outbound]\nallow = {}\n{extra}",
        json!(allow)
    );
    let component = support::guest("fetch");
    server
        .deploy_files(&[("agent.wasm", &component)], &manifest)
        .await
}

/// Runs one `/fetch` turn; returns its events.
async fn fetch(server: &Server, url: &str) -> Vec<Value> {
    let session = server.session("fetch", "/fetch", json!({"url": url})).await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED", "TURN_ERROR"]).await
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

#[tokio::test]
async fn allowed_origin_is_reached_and_recorded_before_and_after() {
    let up = upstream().await;
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    let row = deploy_fetch(&server, &[&up.origin]).await;
    assert_eq!(row["outbound"]["declared"], json!([up.origin]));
    assert_eq!(row["outbound"]["effective"], json!([up.origin]));

    let events = fetch(&server, &format!("{}/data?token=hunter2-secret", up.origin)).await;
    assert_eq!(
        types(&events)[2..],
        [
            "HTTP_REQUEST",
            "HTTP_RESPONSE",
            "MESSAGE_START",
            "MESSAGE_DELTA",
            "MESSAGE_END",
            "TURN_ENDED"
        ],
        "{events:#?}"
    );
    let request = &of_type(&events, "HTTP_REQUEST")[0]["payload"];
    assert_eq!(request["method"], "GET");
    assert_eq!(request["origin"], up.origin.as_str());
    assert_eq!(
        request["path"], "/data",
        "the query string stays out of the journal"
    );
    let response = &of_type(&events, "HTTP_RESPONSE")[0]["payload"];
    assert_eq!(response["request_id"], request["request_id"]);
    assert_eq!(response["status"], 200);
    assert_eq!(response["bytes"], 5);
    assert_eq!(response["error"], Value::Null);
    assert!(response["duration_ms"].as_f64().unwrap() >= 0.0);
    let end = &of_type(&events, "MESSAGE_END")[0]["payload"];
    assert_eq!(end["text"], "status=200 bytes=5 body=hello");
    assert_eq!(up.hits.load(Ordering::SeqCst), 1);
    // The client's own input holds the URL; the host's records must not.
    let records = serde_json::to_string(&[request, response]).unwrap();
    assert!(
        !records.contains("hunter2"),
        "the query reached the records"
    );
}

#[tokio::test]
async fn origins_off_the_allowlist_never_leave_the_machine() {
    let up = upstream().await;
    let other = upstream().await;
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    deploy_fetch(&server, &[&up.origin]).await;

    for url in [
        format!("{}/data", other.origin),
        // Same host, other scheme; a look-alike host name.
        format!("https://{}/data", &up.origin["http://".len()..]),
        "http://127.0.0.1.nip.io/data".to_string(),
    ] {
        let events = fetch(&server, &url).await;
        let denied = of_type(&events, "HTTP_REQUEST_DENIED");
        assert_eq!(denied.len(), 1, "{url}: {events:#?}");
        assert!(
            denied[0]["payload"]["reason"]
                .as_str()
                .unwrap()
                .contains("allowlist"),
            "{denied:?}"
        );
        assert!(of_type(&events, "HTTP_REQUEST").is_empty());
        let error = events.last().unwrap();
        assert_eq!(error["type"], "TURN_ERROR", "{events:#?}");
        let message = error["payload"]["message"].as_str().unwrap();
        assert!(message.contains("allowlist"), "{message}");
    }
    assert_eq!(up.hits.load(Ordering::SeqCst), 0);
    assert_eq!(other.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn private_addresses_are_refused_unless_the_operator_allows_them() {
    let up = upstream().await;
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    // Declared, but it is loopback and the operator did not allow private addresses.
    let port = up.origin.rsplit(':').next().unwrap();
    deploy_fetch(
        &server,
        &[
            &up.origin,
            &format!("http://localhost:{port}"),
            "http://169.254.169.254",
        ],
    )
    .await;
    for url in [
        format!("{}/data", up.origin),
        format!("http://localhost:{port}/data"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
    ] {
        let events = fetch(&server, &url).await;
        let denied = of_type(&events, "HTTP_REQUEST_DENIED");
        assert_eq!(denied.len(), 1, "{url}: {events:#?}");
        let reason = denied[0]["payload"]["reason"].as_str().unwrap();
        assert!(
            reason.contains("loopback") || reason.contains("link-local"),
            "{reason}"
        );
        assert!(reason.contains("--outbound-allow-private"), "{reason}");
        assert!(of_type(&events, "HTTP_REQUEST").is_empty());
        assert_eq!(events.last().unwrap()["type"], "TURN_ERROR");
    }
    assert_eq!(up.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_operator_ceiling_narrows_what_a_deployment_declares() {
    let up = upstream().await;
    let dir = support::data_dir();
    let server = Server::start_with(
        dir.path(),
        &[
            "--outbound-allow-private",
            "--outbound-allow",
            "https://*.openai.com",
        ],
    )
    .await;
    let row = deploy_fetch(&server, &[&up.origin, "https://api.openai.com"]).await;
    assert_eq!(
        row["outbound"]["effective"],
        json!(["https://api.openai.com"])
    );
    let events = fetch(&server, &format!("{}/data", up.origin)).await;
    assert_eq!(of_type(&events, "HTTP_REQUEST_DENIED").len(), 1);
    assert_eq!(up.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_malformed_origin_is_refused_at_deploy() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let component = support::guest("fetch");
    let manifest = "[app]\nslug = \"fetch\"\n[agent]\nentry = \"agent.wasm\"\n[outbound]\nallow = [\"https://api.openai.com/v1\"]\n";
    let (status, body) = server
        .upload(bundle(&[("agent.wasm", &component)]), manifest)
        .await;
    assert_eq!(status, 422, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("outbound.allow"), "{message}");
    assert!(message.contains("https://api.openai.com/v1"), "{message}");
}

#[tokio::test]
async fn a_hung_upstream_ends_the_turn_at_its_deadline_with_the_request_on_record() {
    let up = upstream().await;
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    deploy_fetch_with(&server, &[&up.origin], "[limits]\nwall_clock_secs = 2\n").await;
    let events = fetch(&server, &format!("{}/hang", up.origin)).await;
    assert_eq!(
        types(&events)[2..],
        ["HTTP_REQUEST", "HTTP_RESPONSE", "TURN_ERROR"],
        "{events:#?}"
    );
    let response = &of_type(&events, "HTTP_RESPONSE")[0]["payload"];
    assert_eq!(response["status"], Value::Null);
    assert!(
        response["error"].as_str().unwrap().contains("turn ended"),
        "{response}"
    );
    assert_eq!(events.last().unwrap()["payload"]["kind"], "deadline");
    // Not a stuck session: it takes the next input.
    let session = events[0]["session_id"].as_str().unwrap();
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": {"url": format!("{}/data", up.origin)}}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
}

/// A response is journaled when it ends, not held for the turn's next
/// event: here the guest's next step is a request that never answers.
#[tokio::test]
async fn a_response_is_on_record_as_soon_as_it_ends() {
    let up = upstream().await;
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    deploy_fetch_with(&server, &[&up.origin], "[limits]\nwall_clock_secs = 5\n").await;
    let input =
        json!({"url": format!("{}/data", up.origin), "then_url": format!("{}/hang", up.origin)});
    let session = server.session("fetch", "/fetch", input).await;
    let mut stream = server.events(&session, None).await;
    // Read up to the second request's marker, while the guest waits on /hang.
    let mut seen = Vec::new();
    while of_type(&seen, "HTTP_REQUEST").len() < 2 {
        let event = stream
            .next(std::time::Duration::from_secs(4))
            .await
            .expect("the second HTTP_REQUEST while the guest waits on /hang");
        seen.push(event);
    }
    assert_eq!(
        types(&seen)[2..],
        ["HTTP_REQUEST", "HTTP_RESPONSE", "HTTP_REQUEST"],
        "{seen:#?}"
    );
    let first = &of_type(&seen, "HTTP_REQUEST")[0]["payload"]["request_id"];
    assert_eq!(
        of_type(&seen, "HTTP_RESPONSE")[0]["payload"]["request_id"],
        *first
    );
    assert_eq!(of_type(&seen, "HTTP_RESPONSE")[0]["payload"]["status"], 200);
    // The hung request ends with the turn, on record too.
    let rest = stream.until(&["TURN_ERROR"]).await;
    assert_eq!(types(&rest), ["HTTP_RESPONSE", "TURN_ERROR"], "{rest:#?}");
}

#[tokio::test]
async fn a_turn_that_ended_its_session_sends_nothing_more() {
    let up = upstream().await;
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    deploy_fetch(&server, &[&up.origin]).await;
    let session = server
        .session(
            "fetch",
            "/end-then-fetch",
            json!({"url": format!("{}/data", up.origin)}),
        )
        .await;
    let mut stream = server.events(&session, None).await;
    let events = stream.until(&["SESSION_ENDED"]).await;
    let denied = of_type(&events, "HTTP_REQUEST_DENIED");
    assert_eq!(denied.len(), 1, "{events:#?}");
    let reason = denied[0]["payload"]["reason"].as_str().unwrap();
    assert!(reason.contains("suspended, failed or ended"), "{reason}");
    assert!(of_type(&events, "HTTP_REQUEST").is_empty());
    assert_eq!(up.hits.load(Ordering::SeqCst), 0);
}

/// A secret that is part of a host name never reaches the journal or the
/// log through a refused request's record: its origin, method and reason
/// are redacted like its path.
#[tokio::test]
async fn a_secret_in_a_refused_host_name_is_redacted_in_the_record_and_the_log() {
    let up = upstream().await;
    let dir = support::data_dir();
    let log = dir.path().join("server.log");
    let server = Server::start_logging_to(dir.path(), &log, &[("RUST_LOG", "info")]).await;
    let (status, body) = server.put_secret("HOSTKEY", "zq7hostsecret").await;
    assert!(status == 201 || status == 200, "{body}");
    let manifest = format!(
        "[app]\nslug = \"fetch\"\n[agent]\nentry = \"agent.wasm\"\nsecrets = [\"HOSTKEY\"]\n[outbound]\nallow = {}\n",
        json!([up.origin])
    );
    let component = support::guest("fetch");
    server
        .deploy_files(&[("agent.wasm", &component)], &manifest)
        .await;

    let events = fetch(&server, "http://zq7hostsecret.example.invalid/x").await;
    let denied = &of_type(&events, "HTTP_REQUEST_DENIED")[0]["payload"];
    assert_eq!(
        denied["origin"], "http://[REDACTED:HOSTKEY].example.invalid",
        "{denied}"
    );
    let records: Vec<_> = (events.iter())
        .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("HTTP_")))
        .collect();
    let records = serde_json::to_string(&records).unwrap();
    assert!(!records.contains("zq7hostsecret"), "{records}");
    // The refusal's log line too (the client's own input is not logged).
    let logged = std::fs::read_to_string(&log).unwrap();
    let refused: Vec<_> = (logged.lines())
        .filter(|l| l.contains("outbound request refused"))
        .collect();
    assert!(!refused.is_empty(), "no refusal logged:\n{logged}");
    for line in refused {
        assert!(!line.contains("zq7hostsecret"), "{line}");
    }
}

/// A turn has at most 16 requests in flight (docs/limits.md): of 20 sent at
/// once, 16 leave and wait at the upstream, 4 are refused at once with the
/// reason on record; each leaves nothing behind once the responses end.
#[tokio::test]
async fn a_turn_has_at_most_sixteen_requests_in_flight() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    let held = Hold::start().await;
    held.deploy_fetch(&server).await;
    let input = json!({"url": format!("{}/held", held.origin), "count": 20});
    let session = server.session("fetch", "/burst", input).await;
    let mut stream = server.events(&session, None).await;
    held.wait_arrived(16).await;
    // The four refusals are on record while the sixteen are still held.
    let mut seen = Vec::new();
    while of_type(&seen, "HTTP_REQUEST_DENIED").len() < 4 {
        let event = stream.next(Duration::from_secs(30)).await;
        seen.push(event.expect("the refusals are journaled while the others are held"));
    }
    assert_eq!(held.arrived(), 16);
    held.release();
    seen.extend(stream.until(&["TURN_ENDED", "TURN_ERROR"]).await);
    let denied = of_type(&seen, "HTTP_REQUEST_DENIED");
    assert_eq!(denied.len(), 4, "{denied:?}");
    for refusal in denied {
        let reason = refusal["payload"]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("16 requests in flight"), "{refusal}");
    }
    assert_eq!(of_type(&seen, "HTTP_REQUEST").len(), 16);
    assert_eq!(of_type(&seen, "HTTP_RESPONSE").len(), 16);
    let said = of_type(&seen, "MESSAGE_END");
    assert_eq!(said[said.len() - 1]["payload"]["text"], "ok=16 refused=4");
    assert_eq!(
        held.arrived(),
        16,
        "no refused request reached the upstream"
    );
}
