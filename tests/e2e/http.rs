//! The HTTP layer itself (api/serve.rs): what a client gets for a request
//! head hyper will not buffer or that has too many fields, and that the server goes on serving after it;
//! a body trickled in slower than `--body-read-timeout-secs` allows gets 408;
//! a flood of `/readyz` reads the store about once;
//! serve flags that only tune the process (`--journal-cache-mb`).

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{self, Server};

/// Sends raw bytes on a fresh connection and returns the response's status line.
async fn raw_status(server: &Server, request: &[u8]) -> String {
    let addr = server.url.trim_start_matches("http://");
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    // The server may answer (and close) before it has read everything.
    let _ = tcp.write_all(request).await;
    let mut response = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = [0u8; 4096];
        while !response.windows(2).any(|w| w == b"\r\n") {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => response.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no response within 10 s");
    let text = String::from_utf8_lossy(&response);
    text.lines().next().unwrap_or_default().to_string()
}

#[tokio::test]
async fn an_oversized_request_head_gets_431_and_the_server_goes_on() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--journal-cache-mb", "8"]).await;
    server.deploy("hello", &support::guest("hello")).await;

    let big = "a".repeat(80 * 1024);
    let request = format!("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n");
    let status = raw_status(&server, request.as_bytes()).await;
    assert!(status.starts_with("HTTP/1.1 431"), "got `{status}`");

    // hyper's limit of 100 header fields (docs/limits.md): 100 pass, 101 do not.
    let fields = |n: usize| -> String { (0..n).map(|i| format!("X-F{i}: v\r\n")).collect() };
    let head = |n| format!("GET /healthz HTTP/1.1\r\nHost: x\r\n{}\r\n", fields(n));
    let status = raw_status(&server, head(99).as_bytes()).await;
    assert!(status.starts_with("HTTP/1.1 200"), "got `{status}`");
    let status = raw_status(&server, head(100).as_bytes()).await;
    assert!(status.starts_with("HTTP/1.1 431"), "got `{status}`");

    // A normal head on a raw connection, and the API as a client uses it.
    let status = raw_status(&server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(status.starts_with("HTTP/1.1 200"), "got `{status}`");
    let session = server.session("hello", "/chat", json!("hi")).await;
    let mut stream = server.events(&session, None).await;
    let seen = stream.until(&["TURN_ENDED"]).await;
    assert_eq!(
        seen.last().map(|e| e["type"].clone()),
        Some(json!("TURN_ENDED"))
    );
}

#[tokio::test]
async fn a_body_sent_at_one_byte_per_second_gets_408() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--body-read-timeout-secs", "2"]).await;
    server.deploy("hello", &support::guest("hello")).await;
    let addr = server.url.trim_start_matches("http://").to_string();
    let mut tcp = TcpStream::connect(&addr).await.expect("connect");
    let body = json!({"app": "hello", "route": "/chat", "input": "hi"}).to_string();
    let head = format!(
        "POST /sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        support::KEY,
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.expect("send the head");
    let (mut read, mut write) = tcp.into_split();
    // One byte a second, until the server answers (or the body is all sent:
    // then it was read to the end, and this test fails below).
    let trickle = tokio::spawn(async move {
        for byte in body.bytes() {
            if write.write_all(&[byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match read.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => response.extend_from_slice(&buf[..n]),
        }
    }
    trickle.abort();
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 408"), "got `{text}`");
    assert!(
        text.contains("\"request_timeout\""),
        "a JSON error: `{text}`"
    );

    // The server goes on: the same request at full speed is served.
    let (status, created) = server
        .post(
            "/sessions",
            json!({"app": "hello", "route": "/chat", "input": "hi"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
}

/// `/readyz` is public and unthrottled: a flood of it costs the store one
/// read a second, not one per request.
#[tokio::test]
async fn a_flood_of_readiness_probes_reads_the_store_about_once() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let probes = |text: &str| -> f64 {
        (text.lines())
            .find_map(|line| line.strip_prefix("agenthost_ready_probes_total "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let metrics = || server.metrics();
    let before = probes(&metrics().await);
    let flood = (0..64).map(|_| server.get("/readyz"));
    for (status, body) in futures::future::join_all(flood).await {
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["status"], "ready", "{body}");
    }
    let read = probes(&metrics().await) - before;
    assert!(
        (1.0..64.0).contains(&read),
        "64 probes at once read the store {read} times"
    );
}
