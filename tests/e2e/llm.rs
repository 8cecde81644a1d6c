//! Declared models (issue 43, docs/llm.md): the `llm-direct` fixture's
//! model loop over `[llm.<alias>]` models, which the host calls with their
//! keys, against the fake provider (OpenAI's streaming format and
//! Anthropic's): the text streamed by the host into the turn's message,
//! tool calls handed back to the agent, LLM_CALL / LLM_RESULT with the
//! provider's usage, the key absent from the agent's environment, the
//! journal and the store; failover before the first token only. Runs on
//! redb and on PostgreSQL (`AGENTHOST_TEST_STORE`).

use serde_json::{Value, json};

use crate::support::agents::{TERMINAL, deltas, of_type, said};
use crate::support::fake_openai::{FakeOpenAi, Reply, chunk};
use crate::support::{self, Server};

/// The key of every alias (secret `LLM_KEY`).
const KEY: &str = "sk-llm-host-held-5f4e3d2c1b";

struct Setup {
    dir: tempfile::TempDir,
    server: Server,
}

/// A server that lets guests reach loopback, `LLM_KEY` set, and
/// `llm-direct` deployed with `models` (`[llm.*]` sections) and every
/// fake's origin allowed.
async fn setup(fakes: &[&FakeOpenAi], models: &str) -> Setup {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    let (status, body) = server.put_secret("LLM_KEY", KEY).await;
    assert_eq!(status, 201, "{body}");
    let allow: Vec<String> = fakes
        .iter()
        .map(|f| format!("\"{}\"", f.origin()))
        .collect();
    let manifest = format!(
        "[app]\nslug = \"llm\"\n[agent]\nentry = \"llm.wasm\"\n\
         [outbound]\nallow = [{}]\n{models}",
        allow.join(", ")
    );
    let component = support::guest("llm-direct");
    server
        .deploy_files(&[("llm.wasm", &component)], &manifest)
        .await;
    Setup { dir, server }
}

/// `[llm.<alias>]` of `provider` at `fake`, with `extra` lines.
fn model(alias: &str, provider: &str, fake: &FakeOpenAi, extra: &str) -> String {
    format!(
        "[llm.{alias}]\nprovider = \"{provider}\"\nbase_url = \"{}\"\nmodel = \"{provider}-fake\"\n\
         api_key = {{ secret = \"LLM_KEY\" }}\nmax_output_tokens = 512\n{extra}",
        fake.base_url()
    )
}

impl Setup {
    /// A session on `route` with `input`, until its turn's terminal event.
    async fn turn(&self, route: &str, input: Value) -> (String, Vec<Value>) {
        let session = self.server.session("llm", route, input).await;
        let mut stream = self.server.events(&session, None).await;
        let events = stream.until(TERMINAL).await;
        (session, events)
    }
}

fn last_type(events: &[Value]) -> &str {
    events.last().and_then(|e| e["type"].as_str()).unwrap_or("")
}

#[tokio::test]
async fn an_openai_model_streams_through_the_host_and_is_journaled() {
    let fake = FakeOpenAi::start(vec![
        Reply::tool_calls("", &[("echo", "{\"x\":1}")]),
        Reply::text(&["Hel", "lo ", "there"]),
    ])
    .await;
    let setup = setup(
        &[&fake],
        &model(
            "main",
            "openai",
            &fake,
            "price = { input_per_mtok = 1.0, output_per_mtok = 2.0 }\n",
        ),
    )
    .await;
    let (_, events) = setup.turn("/chat", json!("hi")).await;
    assert_eq!(last_type(&events), "TURN_ENDED", "{events:#?}");
    // The host streamed the text into the turn's message, once.
    assert_eq!(
        deltas(&events)[1..],
        ["Hel", "lo ", "there"],
        "the user's, then the model's"
    );
    assert_eq!(said(&events), ["Hello there"]);
    // The model's tool call came back to the agent, which ran it.
    let calls = of_type(&events, "TOOL_CALL");
    assert_eq!(calls.len(), 1, "{events:#?}");
    assert_eq!(calls[0]["payload"]["name"], "echo");
    assert_eq!(
        of_type(&events, "TOOL_RESULT")[0]["payload"]["output"],
        json!({"x": 1})
    );
    // One LLM_CALL per request, each before its request, with its result.
    let llm_calls = of_type(&events, "LLM_CALL");
    let results = of_type(&events, "LLM_RESULT");
    assert_eq!((llm_calls.len(), results.len()), (2, 2), "{events:#?}");
    assert_eq!(
        llm_calls[0]["payload"],
        json!({"call_id": "llm_1_1", "alias": "main", "provider": "openai", "model": "openai-fake"})
    );
    let first_call = events.iter().position(|e| e["type"] == "LLM_CALL").unwrap();
    let first_request = events
        .iter()
        .position(|e| e["type"] == "HTTP_REQUEST")
        .unwrap();
    assert!(first_call < first_request, "{events:#?}");
    let result = &results[1]["payload"];
    assert_eq!(result["call_id"], "llm_1_2");
    assert_eq!(
        result["usage"],
        json!({"input_tokens": 20, "output_tokens": 7})
    );
    assert_eq!(result["finish_reason"], "stop");
    assert_eq!(result["served_by"], "main");
    assert_eq!(result["cost"], json!(0.000034));
    assert_eq!(results[0]["payload"]["finish_reason"], "tool_calls");
    // The host sent the key and the alias's model and cap; the agent's conversation.
    let received = fake.received();
    assert_eq!(received.len(), 2);
    assert_eq!(
        received[0].authorization.as_deref(),
        Some(&*format!("Bearer {KEY}"))
    );
    assert_eq!(received[0].body["model"], "openai-fake");
    assert_eq!(received[0].body["max_tokens"], 512);
    assert_eq!(received[0].body["stream"], true);
    assert_eq!(received[0].body["tools"][0]["function"]["name"], "echo");
    assert_eq!(
        received[1].body["messages"][2]["tool_calls"][0]["function"]["name"],
        "echo"
    );
    assert_eq!(received[1].body["messages"][3]["role"], "tool");
    // The key is in neither the journal nor the store nor the agent's environment.
    let journal = serde_json::to_string(&events).unwrap();
    assert!(!journal.contains(KEY));
    let (_, env) = setup.turn("/env", json!(null)).await;
    let env = said(&env).join("\n");
    assert!(!env.contains(KEY) && !env.contains("LLM_KEY"), "{env}");
    let (_, models) = setup.turn("/models", json!(null)).await;
    assert_eq!(said(&models), ["models=main"]);
    let stored = support::stored_bytes(setup.dir.path());
    assert!(!stored.windows(KEY.len()).any(|w| w == KEY.as_bytes()));
}

#[tokio::test]
async fn an_anthropic_model_streams_through_the_host_and_is_journaled() {
    let fake = FakeOpenAi::start(vec![Reply::anthropic_text(&["Bon", "jour"])]).await;
    let setup = setup(&[&fake], &model("main", "anthropic", &fake, "")).await;
    let (_, events) = setup.turn("/chat", json!("salut")).await;
    assert_eq!(last_type(&events), "TURN_ENDED", "{events:#?}");
    assert_eq!(deltas(&events)[1..], ["Bon", "jour"]);
    assert_eq!(said(&events), ["Bonjour"]);
    let call = &of_type(&events, "LLM_CALL")[0]["payload"];
    assert_eq!(
        (&call["provider"], &call["model"]),
        (&json!("anthropic"), &json!("anthropic-fake"))
    );
    let result = &of_type(&events, "LLM_RESULT")[0]["payload"];
    assert_eq!(
        result["usage"],
        json!({"input_tokens": 11, "output_tokens": 5})
    );
    assert_eq!(result["finish_reason"], "stop");
    assert!(result.get("cost").is_none(), "{result}");
    let received = fake.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, "/v1/messages");
    assert_eq!(received[0].api_key.as_deref(), Some(KEY));
    assert_eq!(received[0].authorization, None);
    // The system prompt moved to `system`, the conversation kept.
    assert_eq!(received[0].body["system"], "Be brief.");
    assert_eq!(
        received[0].body["messages"],
        json!([{"role": "user", "content": "salut"}])
    );
    assert!(!serde_json::to_string(&events).unwrap().contains(KEY));
}

#[tokio::test]
async fn a_primary_failing_before_its_first_token_falls_over_to_the_fallback() {
    let primary = FakeOpenAi::start(vec![Reply::status(503, "overloaded")]).await;
    let backup = FakeOpenAi::start(vec![Reply::anthropic_text(&["from ", "backup"])]).await;
    let models = format!(
        "{}{}",
        model("main", "openai", &primary, "fallbacks = [\"backup\"]\n"),
        model("backup", "anthropic", &backup, "")
    );
    let setup = setup(&[&primary, &backup], &models).await;
    let (_, events) = setup.turn("/chat", json!("hi")).await;
    assert_eq!(last_type(&events), "TURN_ENDED", "{events:#?}");
    assert_eq!(said(&events), ["from backup"]);
    let calls = of_type(&events, "LLM_CALL");
    let results = of_type(&events, "LLM_RESULT");
    assert_eq!((calls.len(), results.len()), (2, 2), "{events:#?}");
    assert_eq!(calls[0]["payload"]["alias"], "main");
    assert_eq!(calls[1]["payload"]["alias"], "backup");
    assert_eq!(results[0]["payload"]["finish_reason"], "error");
    let error = results[0]["payload"]["error"].as_str().unwrap();
    assert!(
        error.contains("503") && error.contains("overloaded"),
        "{error}"
    );
    assert!(results[0]["payload"].get("served_by").is_none());
    assert_eq!(results[1]["payload"]["served_by"], "backup");
    // No message was opened for the failed request.
    let starts = of_type(&events, "MESSAGE_START");
    let assistant = starts
        .iter()
        .filter(|e| e["payload"]["role"] == "assistant");
    assert_eq!(assistant.count(), 1, "{events:#?}");
    assert_eq!((primary.received().len(), backup.received().len()), (1, 1));
}

#[tokio::test]
async fn a_model_failing_after_its_first_token_fails_the_turn_without_a_second_request() {
    let primary = FakeOpenAi::start(vec![Reply::Cut(vec![
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "Half an ans"}), None),
    ])])
    .await;
    let backup = FakeOpenAi::start(vec![Reply::text(&["never"])]).await;
    let models = format!(
        "{}{}",
        model("main", "openai", &primary, "fallbacks = [\"backup\"]\n"),
        model("backup", "openai", &backup, "")
    );
    let setup = setup(&[&primary, &backup], &models).await;
    let (_, events) = setup.turn("/chat", json!("hi")).await;
    let results: Vec<_> = (of_type(&events, "LLM_RESULT").iter())
        .chain(of_type(&events, "HTTP_RESPONSE").iter())
        .map(|e| e["payload"].clone())
        .collect();
    assert_eq!(last_type(&events), "TURN_ERROR", "{results:#?}");
    let message = events.last().unwrap()["payload"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("declared model failed"), "{message}");
    assert_eq!(deltas(&events)[1..], ["Half an ans"]);
    // The message that was cut is closed as incomplete.
    let end = of_type(&events, "MESSAGE_END");
    let end = end.last().unwrap();
    assert_eq!(end["payload"]["incomplete"], true, "{end}");
    assert_eq!(of_type(&events, "LLM_CALL").len(), 1, "{events:#?}");
    let result = &of_type(&events, "LLM_RESULT")[0]["payload"];
    assert_eq!(result["finish_reason"], "error");
    assert_eq!((primary.received().len(), backup.received().len()), (1, 0));
}

#[tokio::test]
async fn an_unknown_alias_fails_the_turn_and_sends_nothing() {
    let fake = FakeOpenAi::start(vec![Reply::text(&["x"])]).await;
    let setup = setup(&[&fake], &model("main", "openai", &fake, "")).await;
    let (_, events) = setup.turn("/alias", json!({"alias": "nope"})).await;
    assert_eq!(last_type(&events), "TURN_ERROR", "{events:#?}");
    let message = events.last().unwrap()["payload"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("no `[llm.nope]`"), "{message}");
    assert!(of_type(&events, "LLM_CALL").is_empty());
    assert!(fake.received().is_empty());
}
