//! Edges of the contract a review found (issue 15): every JSON body must be
//! an object (serde would read an array into a struct field by field), and
//! the `Bearer` scheme is case-insensitive (RFC 9110); text with a NUL
//! character is refused alike on both engines (PostgreSQL cannot store it,
//! and one such row would fail a commit shared with other sessions' events).

use serde_json::{Value, json};

use crate::support::{self, KEY, Server};

/// A server with `hello` deployed and one of its sessions idle after its
/// first turn (the data dir is returned to outlive the test).
async fn idle_hello_session() -> (tempfile::TempDir, Server, String) {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("hello", &support::guest("hello")).await;
    let session = server.session("hello", "/chat", json!("hi")).await;
    server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED"])
        .await;
    (dir, server, session)
}

#[tokio::test]
async fn a_json_array_is_refused_where_an_object_is_expected() {
    let (_dir, server, session) = idle_hello_session().await;

    let cases: [(&str, &str, Value); 5] = [
        ("POST", "/sessions", json!(["hello", "/chat", "text"])),
        (
            "POST",
            &format!("/sessions/{session}/input"),
            json!(["text"]),
        ),
        (
            "POST",
            &format!("/sessions/{session}/approval"),
            json!([true, "alice"]),
        ),
        ("POST", "/api-keys", json!(["platform", "ops"])),
        ("PUT", "/secrets/TOKEN", json!(["value"])),
    ];
    for (method, path, body) in cases {
        let request = match method {
            "PUT" => server.client.put(server.url(path)),
            _ => server.client.post(server.url(path)),
        };
        let response = request.bearer_auth(KEY).json(&body).send().await.unwrap();
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap();
        assert_eq!(status, 422, "{method} {path}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid_body", "{answer}");
    }
    // Nothing was done: one session, on its first turn; no key, no secret.
    let (_, page) = server.get("/sessions").await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1, "{page}");
    assert_eq!(page["items"][0]["turn"], 1, "{page}");
    let (_, secrets) = server.get("/secrets").await;
    assert_eq!(secrets, json!([]));
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let response = server
            .client
            .get(server.url("/apps"))
            .header("authorization", format!("{scheme} {KEY}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{scheme}");
    }
    for value in [
        format!("Basic {KEY}"),
        format!("Bearer{KEY}"),
        KEY.to_string(),
    ] {
        let response = server
            .client
            .get(server.url("/apps"))
            .header("authorization", &value)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{value}");
    }
}

#[tokio::test]
async fn an_upload_declared_over_the_limit_is_refused_before_its_body_is_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let addr = server.url.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    // 200 MB declared; only the head and a few bytes are ever sent.
    let head = format!(
        "POST /deployments HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {KEY}\r\n\
         Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 200000000\r\n\r\n--b\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    // The answer comes while the client still owes 199,999,995 bytes.
    while !String::from_utf8_lossy(&answer).contains("}") {
        let n = tokio::time::timeout(std::time::Duration::from_secs(30), stream.read(&mut buf))
            .await
            .expect("an answer before the body was sent")
            .unwrap();
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");
}

#[tokio::test]
async fn text_with_a_nul_character_is_refused_on_every_engine() {
    let (_dir, server, session) = idle_hello_session().await;
    // In a JSON body: an input, an AG-UI thread id, a key's name.
    let bodies = [
        (
            "/sessions",
            json!({"app": "hello", "route": "/chat", "input": "a\u{0}b"}),
        ),
        (
            &format!("/sessions/{session}/input") as &str,
            json!({"input": "\u{0}"}),
        ),
        (
            "/api-keys",
            json!({"scope": "platform", "name": "ops\u{0}"}),
        ),
        (
            "/ag-ui/hello/chat",
            json!({"threadId": "t\u{0}-0123456789abcdef0123456789", "runId": "r",
                   "messages": [{"id": "m", "role": "user", "content": "hi"}]}),
        ),
    ];
    for (path, body) in bodies {
        let (status, answer) = server.post(path, body).await;
        assert_eq!(
            (status, &answer["error"]["code"]),
            (422, &json!("invalid_body")),
            "{path}: {answer}"
        );
    }
    // In a query and a path.
    for (path, code) in [
        ("/sessions?app=hel%00lo", "invalid_query"),
        ("/approvals?app=%00", "invalid_query"),
        ("/apps/hel%00lo", "invalid_path"),
    ] {
        let (status, answer) = server.get(path).await;
        assert_eq!(
            (status, &answer["error"]["code"]),
            (400, &json!(code)),
            "{path}: {answer}"
        );
    }
    // Nothing of it reached the journal: the session took no second input.
    let (status, answer) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "idle", "{answer}");
}
