//! `approver = "end_user"` declared in code (docs/end-users.md, "End users
//! who decide their own approvals"): the same agent in Rust, Python and
//! TypeScript (`tests/fixtures/self-service`, `tests/fixtures/python/
//! self-service`, `tests/fixtures/typescript/self-service`) gates two tools
//! in code and leaves one of them, `cancel_order`, to the session's end
//! user through its SDK; the manifest says nothing about either. The end
//! user decides a `cancel_order` call of their own session (the journal
//! names them), and may not decide a `refund` call (403), which an
//! operator still decides.

use serde_json::{Value, json};

use crate::support::{self, EventStream, Server, agents};

/// Deploys `component` as `slug` (a manifest with `[end_users]` and no
/// word about approvers).
async fn deploy(server: &Server, slug: &str, language: &str, component: &[u8]) {
    let agent = match language {
        "rust" => "entry = \"agent.wasm\"\n".to_string(),
        _ => format!("language = \"{language}\"\n"),
    };
    let manifest = format!("[app]\nslug = \"{slug}\"\n[agent]\n{agent}[end_users]\n");
    agents::deploy(server, component, &manifest).await;
}

/// A session of `slug` created by `token` with `input`, read through its
/// first suspension: its id and stream token.
async fn suspended(server: &Server, token: &str, slug: &str, input: &str) -> (String, String) {
    let body = json!({"app": slug, "route": "/shop", "input": input});
    let (status, created) = server.post_as(token, "/sessions", body).await;
    assert_eq!(status, 201, "{created}");
    let session = created["session_id"].as_str().unwrap().to_string();
    let stream_token = created["stream_token"].as_str().unwrap().to_string();
    let events = read(server, &session, &stream_token, "TOOL_APPROVAL_REQUIRED").await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "TOOL_APPROVAL_REQUIRED", "{events:#?}");
    (session, stream_token)
}

async fn read(server: &Server, session: &str, token: &str, until: &str) -> Vec<Value> {
    let url = server.url(&format!("/sessions/{session}/events?token={token}"));
    let response = server.client.get(url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    EventStream::new(response)
        .until(&[until, "TURN_ERROR"])
        .await
}

fn said(events: &[Value]) -> String {
    agents::said(events).join(" ")
}

async fn the_end_user_decides_only_what_the_code_leaves_to_them(language: &str, component: &[u8]) {
    let dir = support::data_dir();
    let server = agents::server(dir.path(), &[]).await;
    let slug = format!("shop-{language}");
    deploy(&server, &slug, language, component).await;
    let ada = server.end_user_token(&slug, "ada").await;

    // `cancel_order`: the code leaves it to her; she approves her own call.
    let (session, token) = suspended(&server, &ada, &slug, "cancel o1").await;
    let path = format!("/sessions/{session}/approval");
    let (status, body) = server.post_as(&ada, &path, json!({"approved": true})).await;
    assert_eq!(status, 202, "{language}: {body}");
    let events = read(&server, &session, &token, "TURN_ENDED").await;
    let approved = (events.iter())
        .find(|e| e["type"] == "TOOL_APPROVAL_GRANTED")
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(approved["payload"]["approver"], "ada", "{approved}");
    let text = said(&events);
    assert!(
        text.contains("cancel_order") && text.contains("by ada."),
        "{language}: {text}"
    );

    // `refund`: gated in code too, but not hers to decide; an operator may.
    let (session, token) = suspended(&server, &ada, &slug, "refund o2").await;
    let path = format!("/sessions/{session}/approval");
    let (status, body) = server.post_as(&ada, &path, json!({"approved": true})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (403, &json!("forbidden")),
        "{language}: {body}"
    );
    let (status, body) = server.post(&path, json!({"approved": true})).await;
    assert_eq!(status, 202, "{language}: an operator still decides: {body}");
    let events = read(&server, &session, &token, "TURN_ENDED").await;
    assert!(said(&events).contains("refund"), "{language}: {events:#?}");
}

#[tokio::test]
async fn rust_code_leaves_a_tool_to_the_end_user() {
    let component = support::guest("self-service");
    the_end_user_decides_only_what_the_code_leaves_to_them("rust", &component).await;
}

#[tokio::test]
async fn python_code_leaves_a_tool_to_the_end_user() {
    let component = crate::python::python_guest("tests/fixtures/python/self-service");
    the_end_user_decides_only_what_the_code_leaves_to_them("python", &component).await;
}

#[tokio::test]
async fn typescript_code_leaves_a_tool_to_the_end_user() {
    let component = crate::typescript::typescript_guest("tests/fixtures/typescript/self-service");
    the_end_user_decides_only_what_the_code_leaves_to_them("typescript", &component).await;
}
