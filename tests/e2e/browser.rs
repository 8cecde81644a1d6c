//! Browser clients: CORS preflight, and an EventSource (which cannot send
//! headers) reading a session's stream with a session-scoped stream token.

use std::time::Duration;

use eventsource_client::{Client, ClientBuilder, ReconnectOptions, SSE};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::support::{self, Server};

#[tokio::test]
async fn preflight_allows_the_configured_origin_and_the_headers_a_stream_needs() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--cors-origin", "https://app.example"]).await;
    let preflight = |origin: &'static str| {
        server
            .client
            .request(reqwest::Method::OPTIONS, server.url("/sessions/x/events"))
            .header("Origin", origin)
            .header("Access-Control-Request-Method", "GET")
            .header(
                "Access-Control-Request-Headers",
                "authorization,last-event-id",
            )
            .send()
    };
    let allowed = preflight("https://app.example").await.unwrap();
    assert!(allowed.status().is_success(), "{}", allowed.status());
    let headers = allowed.headers();
    assert_eq!(
        headers["access-control-allow-origin"],
        "https://app.example"
    );
    let allow = headers["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(
        allow.contains("authorization") && allow.contains("last-event-id"),
        "{allow}"
    );
    let refused = preflight("https://evil.example").await.unwrap();
    assert!(
        refused
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}

#[tokio::test]
async fn an_eventsource_reads_the_stream_with_a_stream_token() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("hello", &support::guest("hello")).await;
    let (_, frontend) = server
        .mint_key("invocation", "frontend", Some("hello"))
        .await;
    let (status, created) = server
        .post_as(
            &frontend,
            "/sessions",
            json!({"app": "hello", "route": "/chat", "input": "hi there"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let session = created["session_id"].as_str().unwrap();
    let token = created["stream_token"].as_str().unwrap();

    // A spec-following EventSource client: no Authorization header, the token in the URL.
    let url = server.url(&format!("/sessions/{session}/events?token={token}"));
    let transport = launchdarkly_sdk_transport::HyperTransport::new().unwrap();
    let client = ClientBuilder::for_url(&url)
        .unwrap()
        .reconnect(ReconnectOptions::reconnect(false).build())
        .build_with_transport(transport);
    let mut stream = client.stream();
    let mut types = Vec::new();
    while let Ok(Some(item)) = tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
        if let SSE::Event(event) = item.unwrap() {
            assert_eq!(
                event.event_type, "message",
                "no `event:` field: onmessage sees every frame"
            );
            let envelope: Value = serde_json::from_str(&event.data).unwrap();
            assert_eq!(event.id.as_deref(), envelope["id"].as_str());
            types.push(envelope["type"].as_str().unwrap().to_string());
            if envelope["type"] == "TURN_ENDED" {
                break;
            }
        }
    }
    assert_eq!(types.first().map(String::as_str), Some("SESSION_CREATED"));
    assert_eq!(types.last().map(String::as_str), Some("TURN_ENDED"));

    // A freshly minted token works too; a token opens nothing else.
    let (status, minted) = server
        .post_as(
            &frontend,
            &format!("/sessions/{session}/stream-token"),
            json!({}),
        )
        .await;
    assert_eq!(status, 201, "{minted}");
    let fresh = minted["stream_token"].as_str().unwrap();
    let get = |path: String| server.client.get(server.url(&path)).send();
    let ok = get(format!("/sessions/{session}/events?token={fresh}"))
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let other = server.session("hello", "/chat", json!("x")).await;
    let wrong_session = get(format!("/sessions/{other}/events?token={fresh}"))
        .await
        .unwrap();
    assert_eq!(wrong_session.status(), 404);
    let not_events = get(format!("/sessions/{session}?token={fresh}"))
        .await
        .unwrap();
    assert_eq!(not_events.status(), 401);
    let forged = get(format!("/sessions/{session}/events?token={fresh}0"))
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
}
