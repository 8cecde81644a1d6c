//! Redaction of secrets the host cannot see literally (docs/events.md,
//! "Redaction"): a secret the agent sends percent-encoded in an outbound
//! request's path reaches the upstream, but never the journal; the
//! `HTTP_REQUEST` record shows it as `[REDACTED:<NAME>]`. (Numbers and the
//! percent-decoded path are also covered, table-driven, by `host/src/redact.rs`.)

use serde_json::json;

use crate::support::hold::Hold;
use crate::support::{self, Server};

/// A value with characters a client percent-encodes.
const SECRET: &str = "k3y/w1th+ch4rs=";

#[tokio::test]
async fn a_secret_sent_percent_encoded_in_a_path_never_reaches_the_journal() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    let (status, body) = server.put_secret("API_KEY", SECRET).await;
    assert!(status == 200 || status == 201, "{status} {body}");
    let hold = Hold::start().await;
    hold.release();
    let manifest = format!(
        "[app]\nslug = \"fetch\"\n[agent]\nentry = \"agent.wasm\"\nsecrets = [\"API_KEY\"]\n[outbound]\nallow = [\"{}\"]\n",
        hold.origin
    );
    let component = support::guest("fetch");
    server
        .deploy_files(&[("agent.wasm", &component)], &manifest)
        .await;

    let input = json!({"url": format!("{}/v1", hold.origin), "path_secret": "API_KEY"});
    let session = server.session("fetch", "/fetch", input).await;
    let events = server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:?}");
    // The request left with the secret, percent-encoded byte by byte.
    let sent = hold.paths();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let encoded: String = SECRET.bytes().map(|b| format!("%{b:02X}")).collect();
    assert_eq!(sent[0], format!("/v1/{encoded}"));
    // The journal shows it redacted, and holds it in no form.
    let request = (events.iter())
        .find(|e| e["type"] == "HTTP_REQUEST")
        .expect("an HTTP_REQUEST record");
    assert_eq!(
        request["payload"]["path"], "/v1/[REDACTED:API_KEY]",
        "{request}"
    );
    let journal = serde_json::to_string(&events).unwrap();
    assert!(!journal.contains(SECRET), "{journal}");
    assert!(!journal.contains(&encoded), "{journal}");
    assert!(!journal.to_lowercase().contains(&encoded.to_lowercase()));
}

/// A tool call id is journaled as the agent chose it (the agent answers by
/// it), so one holding a secret's value is refused instead: the `rogue`
/// fixture's `/same-id` proposes the id `call_same`, here a secret's value.
#[tokio::test]
async fn a_tool_call_id_holding_a_secret_is_refused_not_journaled() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let (status, body) = server.put_secret("CALL_ID", "call_same").await;
    assert!(status == 200 || status == 201, "{status} {body}");
    let manifest =
        "[app]\nslug = \"rogue\"\n[agent]\nentry = \"agent.wasm\"\nsecrets = [\"CALL_ID\"]\n";
    let component = support::guest("rogue");
    server
        .deploy_files(&[("agent.wasm", &component)], manifest)
        .await;
    let session = server.session("rogue", "/same-id", json!("")).await;
    let events = server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "TURN_ERROR", "{last}");
    assert_eq!(last["payload"]["kind"], "invalid_order", "{last}");
    let message = last["payload"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("holds the value of a secret"), "{message}");
    assert!(
        !events.iter().any(|e| e["type"] == "TOOL_CALL"),
        "{events:?}"
    );
    let journal = serde_json::to_string(&events).unwrap();
    assert!(!journal.contains("call_same"), "{journal}");
}
