//! Declared models from the Python and TypeScript SDKs (issue 43,
//! docs/llm.md): each SDK's `llm-direct` fixture (tests/fixtures/python/,
//! tests/fixtures/typescript/) runs its `ChatLoop` over `[llm.main]`
//! (with a fallback) against the fake provider: the host streams the text
//! into the turn's message once (the SDK writes nothing again), the tool
//! call comes back to the agent and goes to `host.tool-calls`, the fallback
//! serves after a 503, LLM_CALL / LLM_RESULT carry the provider's usage,
//! and the key is in neither the agent's environment nor the journal nor
//! the store. Runs on redb and on PostgreSQL (`AGENTHOST_TEST_STORE`).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::python::python_guest;
use crate::support::agents::{self, TERMINAL, deltas, of_type, said, server};
use crate::support::fake_openai::{FakeOpenAi, Reply};
use crate::support::{self, Server};
use crate::typescript::typescript_guest;

/// The key of both aliases (secret `LLM_KEY`): the agent must never see it.
const KEY: &str = "sk-llm-sdk-held-9a8b7c6d5e";
/// A secret the agent is given (`[agent] secrets`): its `/env` shows it
/// (redacted), so an environment that shows nothing cannot pass for one
/// without the key.
const NOTE: &str = "visible-note-4f3e";

/// `[llm.<alias>]` of `provider` at `fake`, with `extra` lines.
fn model(alias: &str, provider: &str, fake: &FakeOpenAi, extra: &str) -> String {
    format!(
        "[llm.{alias}]\nprovider = \"{provider}\"\nbase_url = \"{}\"\nmodel = \"{provider}-fake\"\n\
         api_key = {{ secret = \"LLM_KEY\" }}\nmax_output_tokens = 256\n{extra}",
        fake.base_url()
    )
}

/// A session of `slug` on `route` with `input`, until its turn's terminal event.
async fn turn(server: &Server, slug: &str, route: &str, input: Value) -> Vec<Value> {
    let session = server.session(slug, route, input).await;
    let mut stream = server.events(&session, None).await;
    stream.until(TERMINAL).await
}

fn last_type(events: &[Value]) -> &str {
    events.last().and_then(|e| e["type"].as_str()).unwrap_or("")
}

/// `component` in `language` deployed with `[llm.main]` (OpenAI's format,
/// answering a tool call, then 503) falling back to `[llm.backup]`
/// (Anthropic's, answering text): one `/chat` turn streams through both.
async fn streams_through_the_declared_models(language: &str, component: Arc<Vec<u8>>) {
    let primary = FakeOpenAi::start(vec![
        Reply::tool_calls("", &[("echo", "{\"x\":1}")]),
        Reply::status(503, "overloaded"),
    ])
    .await;
    let backup = FakeOpenAi::start(vec![Reply::anthropic_text(&["from ", "backup"])]).await;
    let dir = support::data_dir();
    let server = server(dir.path(), &["--outbound-allow-private"]).await;
    for (name, value) in [("LLM_KEY", KEY), ("AGENT_NOTE", NOTE)] {
        let (status, body) = server.put_secret(name, value).await;
        assert_eq!(status, 201, "{body}");
    }
    let slug = format!("llm-{language}");
    let extra = format!(
        "secrets = [\"AGENT_NOTE\"]\n[outbound]\nallow = [\"{}\", \"{}\"]\n{}{}",
        primary.origin(),
        backup.origin(),
        model("main", "openai", &primary, "fallbacks = [\"backup\"]\n"),
        model("backup", "anthropic", &backup, ""),
    );
    agents::deploy(
        &server,
        &component,
        &agents::manifest(&slug, language, &extra),
    )
    .await;

    let events = turn(&server, &slug, "/chat", json!("hi")).await;
    assert_eq!(last_type(&events), "TURN_ENDED", "{events:#?}");
    // The host streamed the text into one message, once; the SDK wrote none.
    assert_eq!(deltas(&events)[1..], ["from ", "backup"], "{events:#?}");
    assert_eq!(said(&events), ["from backup"]);
    let assistant = of_type(&events, "MESSAGE_START")
        .into_iter()
        .filter(|e| e["payload"]["role"] == "assistant")
        .count();
    assert_eq!(assistant, 1, "{events:#?}");
    // The model's tool call came back to the agent, which handed it over and ran it.
    let calls = of_type(&events, "TOOL_CALL");
    assert_eq!(calls.len(), 1, "{events:#?}");
    assert_eq!(calls[0]["payload"]["name"], "echo");
    assert_eq!(
        of_type(&events, "TOOL_RESULT")[0]["payload"]["output"],
        json!({"x": 1})
    );
    // One LLM_CALL per request, each with its LLM_RESULT and the provider's usage.
    let llm_calls: Vec<&Value> = (of_type(&events, "LLM_CALL").into_iter())
        .map(|e| &e["payload"])
        .collect();
    let results: Vec<&Value> = (of_type(&events, "LLM_RESULT").into_iter())
        .map(|e| &e["payload"])
        .collect();
    assert_eq!((llm_calls.len(), results.len()), (3, 3), "{events:#?}");
    assert_eq!(
        *llm_calls[0],
        json!({"call_id": "llm_1_1", "alias": "main", "provider": "openai", "model": "openai-fake"})
    );
    assert_eq!(llm_calls[2]["alias"], "backup");
    assert_eq!(results[0]["finish_reason"], "tool_calls");
    assert_eq!(
        results[0]["usage"],
        json!({"input_tokens": 20, "output_tokens": 7})
    );
    assert_eq!(results[1]["finish_reason"], "error");
    assert_eq!(results[2]["served_by"], "backup");
    assert_eq!(
        results[2]["usage"],
        json!({"input_tokens": 11, "output_tokens": 5})
    );
    // The host sent the key; the SDK's conversation carried the tool round trip.
    let received = primary.received();
    assert_eq!((received.len(), backup.received().len()), (2, 1));
    assert_eq!(
        received[0].authorization.as_deref(),
        Some(&*format!("Bearer {KEY}"))
    );
    assert_eq!(received[0].body["messages"][0]["content"], "Be brief.");
    assert_eq!(received[0].body["tools"][0]["function"]["name"], "echo");
    assert_eq!(
        received[1].body["messages"][2]["tool_calls"][0]["function"]["name"],
        "echo"
    );
    assert_eq!(received[1].body["messages"][3]["role"], "tool");
    assert_eq!(backup.received()[0].api_key.as_deref(), Some(KEY));

    // The agent sees its own secret (its value redacted in what it says),
    // never the model's key: neither the value nor, redacted, its name.
    let env = said(&turn(&server, &slug, "/env", json!(null)).await).join("\n");
    assert!(env.contains("AGENT_NOTE=[REDACTED:AGENT_NOTE]"), "{env}");
    assert!(!env.contains(KEY) && !env.contains("LLM_KEY"), "{env}");
    let models = turn(&server, &slug, "/models", json!(null)).await;
    assert_eq!(said(&models), ["models=backup,main"]);
    // Nor the journal, nor the store's bytes.
    assert!(!serde_json::to_string(&events).unwrap().contains(KEY));
    let stored = support::stored_bytes(dir.path());
    assert!(!stored.windows(KEY.len()).any(|w| w == KEY.as_bytes()));
}

#[tokio::test]
async fn a_python_agent_streams_a_declared_model_and_never_sees_its_key() {
    let component = python_guest("tests/fixtures/python/llm-direct");
    streams_through_the_declared_models("python", component).await;
}

#[tokio::test]
async fn a_typescript_agent_streams_a_declared_model_and_never_sees_its_key() {
    let component = typescript_guest("tests/fixtures/typescript/llm-direct");
    streams_through_the_declared_models("typescript", component).await;
}
