//! The `examples/assistant` agent against a fake OpenAI-compatible server:
//! streamed answers, tool calls fed back, gated refunds approved and denied,
//! follow-up turns carrying the conversation, the outbound allowlist, an
//! upstream that hangs, rate limiting and provider errors.

use serde_json::{Value, json};

use crate::support::fake_openai::{FakeOpenAi, Reply, chunk, usage};
use crate::support::{self, EventStream, Server, types};

const KEY: &str = "sk-fake-test-key";
const TERMINAL: &[&str] = &["TURN_ENDED", "TURN_ERROR", "TOOL_APPROVAL_REQUIRED"];

/// A server with the assistant deployed, its secrets pointing at `fake`.
struct Setup {
    _dir: tempfile::TempDir,
    server: Server,
    fake: FakeOpenAi,
}

/// Starts the fake with `replies`, a server that lets guests reach loopback,
/// sets the three secrets and deploys the assistant whose `[outbound] allow`
/// is `allow` (the fake's origin when `None`), plus `extra` manifest text.
async fn setup(replies: Vec<Reply>, allow: Option<&str>, extra: &str) -> Setup {
    let fake = FakeOpenAi::start(replies).await;
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    for (name, value) in [
        ("OPENAI_BASE_URL", fake.base_url()),
        ("OPENAI_API_KEY", KEY.to_string()),
        ("OPENAI_MODEL", "gpt-fake".to_string()),
    ] {
        let (status, body) = server.put_secret(name, &value).await;
        assert_eq!(status, 201, "PUT /secrets/{name}: {body}");
    }
    let allow = allow.map_or_else(|| fake.origin(), str::to_string);
    let manifest = format!(
        "[app]\nslug = \"assistant\"\n[agent]\nentry = \"assistant.wasm\"\n\
         secrets = [\"OPENAI_BASE_URL\", \"OPENAI_API_KEY\", \"OPENAI_MODEL\"]\n\
         [outbound]\nallow = [\"{allow}\"]\n{extra}"
    );
    let component = support::guest("assistant");
    server
        .deploy_files(&[("assistant.wasm", &component)], &manifest)
        .await;
    Setup {
        _dir: dir,
        server,
        fake,
    }
}

impl Setup {
    /// Creates a session on `/chat` with `input`; returns it and its stream.
    async fn chat(&self, input: &str) -> (String, EventStream) {
        let session = self
            .server
            .session("assistant", "/chat", json!(input))
            .await;
        let stream = self.server.events(&session, None).await;
        (session, stream)
    }

    async fn input(&self, session: &str, text: &str) {
        let (status, body) = self
            .server
            .post(
                &format!("/sessions/{session}/input"),
                json!({"input": text}),
            )
            .await;
        assert_eq!(status, 202, "{body}");
    }

    async fn decide(&self, session: &str, decision: Value) {
        let (status, body) = self
            .server
            .post(&format!("/sessions/{session}/approval"), decision)
            .await;
        assert_eq!(status, 202, "{body}");
    }

    /// The `messages` of the `n`th request the fake received (from 0).
    fn messages(&self, n: usize) -> Vec<Value> {
        let received = self.fake.received();
        assert!(received.len() > n, "only {} requests", received.len());
        received[n].body["messages"].as_array().unwrap().clone()
    }
}

/// The events of one turn, up to its terminal event (or suspension).
async fn turn(stream: &mut EventStream) -> Vec<Value> {
    stream.until(TERMINAL).await
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn said(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "MESSAGE_END" && e["payload"]["role"] == "assistant")
        .map(|e| e["payload"]["text"].as_str().unwrap().to_string())
        .collect()
}

fn last(events: &[Value]) -> &Value {
    events.last().unwrap()
}

/// Each request the agent made is journaled, without headers or bodies.
fn assert_http_journaled(events: &[Value], fake: &FakeOpenAi, requests: usize) {
    let sent = of_type(events, "HTTP_REQUEST");
    let answered = of_type(events, "HTTP_RESPONSE");
    assert_eq!(sent.len(), requests, "{:?}", types(events));
    assert_eq!(answered.len(), requests, "{:?}", types(events));
    for request in &sent {
        let payload = &request["payload"];
        assert_eq!(payload["method"], "POST", "{payload}");
        assert_eq!(payload["origin"], fake.origin().as_str(), "{payload}");
        assert_eq!(payload["path"], "/v1/chat/completions", "{payload}");
    }
    for response in &answered {
        let payload = &response["payload"];
        assert!(payload["status"].is_u64(), "{payload}");
        assert!(payload["duration_ms"].is_number(), "{payload}");
        assert!(payload["bytes"].is_u64(), "{payload}");
    }
    for event in sent.iter().chain(&answered) {
        let payload = &event["payload"];
        for field in ["headers", "body", "request_body", "response_body"] {
            assert!(payload.get(field).is_none(), "{payload}");
        }
        let text = payload.to_string();
        assert!(!text.contains(KEY) && !text.contains("Bearer"), "{text}");
    }
}

#[tokio::test]
async fn a_streamed_answer_then_a_follow_up_that_carries_the_conversation() {
    let setup = setup(
        vec![
            Reply::text(&["Hello", "! I can look", " up your orders."]),
            Reply::text(&["Order A1002 was ", "delivered."]),
        ],
        None,
        "",
    )
    .await;
    let (session, mut stream) = setup.chat("hi there").await;
    let first = turn(&mut stream).await;
    assert_eq!(last(&first)["type"], "TURN_ENDED", "{first:?}");
    assert_eq!(said(&first), ["Hello! I can look up your orders."]);
    // Streamed as the model sent it: one delta per content chunk.
    let reply = of_type(&first, "MESSAGE_END")
        .into_iter()
        .find(|e| e["payload"]["role"] == "assistant")
        .unwrap()["payload"]["message_id"]
        .clone();
    let deltas: Vec<&str> = of_type(&first, "MESSAGE_DELTA")
        .into_iter()
        .filter(|e| e["payload"]["message_id"] == reply)
        .map(|e| e["payload"]["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, ["Hello", "! I can look", " up your orders."]);
    assert_http_journaled(&first, &setup.fake, 1);

    // The request: streamed, with usage, the declared tools, the key.
    let received = setup.fake.received();
    let request = &received[0];
    assert_eq!(
        request.authorization.as_deref(),
        Some("Bearer sk-fake-test-key")
    );
    assert_eq!(request.body["model"], "gpt-fake");
    assert_eq!(request.body["stream"], true);
    assert_eq!(
        request.body["stream_options"],
        json!({"include_usage": true})
    );
    let tools: Vec<&str> = request.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert_eq!(t["type"], "function");
            assert_eq!(t["function"]["parameters"]["required"], json!(["order_id"]));
            t["function"]["name"].as_str().unwrap()
        })
        .collect();
    assert_eq!(tools, ["lookup_order", "refund_order"]);
    let messages = setup.messages(0);
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(
        messages[1..],
        [json!({"role": "user", "content": "hi there"})]
    );

    // The next turn's request holds the whole conversation, from the journal.
    setup.input(&session, "and A1002?").await;
    let second = turn(&mut stream).await;
    assert_eq!(last(&second)["type"], "TURN_ENDED", "{second:?}");
    assert_eq!(said(&second), ["Order A1002 was delivered."]);
    assert_eq!(
        setup.messages(1)[1..],
        [
            json!({"role": "user", "content": "hi there"}),
            json!({"role": "assistant", "content": "Hello! I can look up your orders."}),
            json!({"role": "user", "content": "and A1002?"}),
        ]
    );
}

#[tokio::test]
async fn parallel_tool_calls_run_and_their_results_go_back_to_the_model() {
    let setup = setup(
        vec![
            Reply::tool_calls(
                "Let me look.",
                &[
                    ("lookup_order", r#"{"order_id": "A1001"}"#),
                    ("lookup_order", r#"{"order_id": "Z9"}"#),
                ],
            ),
            Reply::text(&["A1001 has shipped; I found no order Z9."]),
        ],
        None,
        "",
    )
    .await;
    let (_session, mut stream) = setup.chat("where are A1001 and Z9?").await;
    let events = turn(&mut stream).await;
    assert_eq!(last(&events)["type"], "TURN_ENDED", "{events:?}");
    let calls = of_type(&events, "TOOL_CALL");
    let results = of_type(&events, "TOOL_RESULT");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["payload"]["name"], "lookup_order");
    assert_eq!(
        calls[0]["payload"]["arguments"],
        json!({"order_id": "A1001"})
    );
    assert_eq!(calls[1]["payload"]["arguments"], json!({"order_id": "Z9"}));
    assert_eq!(results[0]["payload"]["status"], "ok");
    assert_eq!(results[0]["payload"]["output"]["status"], "shipped");
    assert_eq!(results[1]["payload"]["status"], "error");
    assert_eq!(results[1]["payload"]["output"], "no order Z9");
    assert_eq!(
        said(&events),
        ["Let me look.", "A1001 has shipped; I found no order Z9."]
    );
    assert_http_journaled(&events, &setup.fake, 2);

    // The second request: the model's calls (with the journal's ids) and their results.
    let ids: Vec<&str> = calls
        .iter()
        .map(|c| c["payload"]["tool_call_id"].as_str().unwrap())
        .collect();
    let messages = setup.messages(1);
    let assistant = &messages[2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"], "Let me look.");
    let sent_ids: Vec<&str> = assistant["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(sent_ids, ids);
    assert_eq!(
        assistant["tool_calls"][0]["function"],
        json!({"name": "lookup_order", "arguments": "{\"order_id\":\"A1001\"}"})
    );
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], ids[0]);
    let shipped: Value = serde_json::from_str(messages[3]["content"].as_str().unwrap()).unwrap();
    assert_eq!(shipped["status"], "shipped");
    assert_eq!(
        messages[4],
        json!({"role": "tool", "tool_call_id": ids[1], "content": "error: no order Z9"})
    );
    assert_eq!(messages.len(), 5);
}

/// Asks for a refund of A1001; returns the session, its stream and the suspended turn.
async fn suspended_refund(setup: &Setup) -> (String, EventStream, Vec<Value>) {
    let (session, mut stream) = setup.chat("please refund A1001").await;
    let events = turn(&mut stream).await;
    let required = last(&events);
    assert_eq!(required["type"], "TOOL_APPROVAL_REQUIRED", "{events:?}");
    assert_eq!(required["payload"]["name"], "refund_order");
    assert_eq!(
        required["payload"]["arguments"],
        json!({"order_id": "A1001"})
    );
    assert_eq!(required["payload"]["reason"], "I will refund A1001.");
    assert_eq!(required["payload"]["gated_by"], json!(["code"]));
    assert_eq!(said(&events), ["I will refund A1001."]);
    assert!(of_type(&events, "TOOL_RESULT").is_empty(), "nothing ran");
    assert_eq!(setup.fake.received().len(), 1);
    let (_, record) = setup.server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["status"], "awaiting_approval");
    (session, stream, events)
}

fn refund_script(after: &str) -> Vec<Reply> {
    vec![
        Reply::tool_calls(
            "I will refund A1001.",
            &[("refund_order", r#"{"order_id":"A1001"}"#)],
        ),
        Reply::text(&[after]),
    ]
}

#[tokio::test]
async fn an_approved_refund_runs_and_the_model_answers() {
    let setup = setup(refund_script("Done: 39.90 EUR refunded."), None, "").await;
    let (session, mut stream, suspended) = suspended_refund(&setup).await;
    let call_id = last(&suspended)["payload"]["tool_call_id"].clone();
    setup.decide(&session, json!({"approved": true})).await;
    let resumed = turn(&mut stream).await;
    assert_eq!(last(&resumed)["type"], "TURN_ENDED", "{resumed:?}");
    assert_eq!(resumed[0]["type"], "TOOL_APPROVAL_GRANTED");
    let result = of_type(&resumed, "TOOL_RESULT")[0];
    assert_eq!(result["payload"]["tool_call_id"], call_id);
    assert_eq!(result["payload"]["status"], "ok");
    assert_eq!(
        result["payload"]["output"],
        json!({"refunded": "A1001", "amount": "39.90 EUR"})
    );
    assert_eq!(said(&resumed), ["Done: 39.90 EUR refunded."]);
    assert_http_journaled(&resumed, &setup.fake, 1);

    let messages = setup.messages(1);
    assert_eq!(messages[2]["content"], "I will refund A1001.");
    assert_eq!(messages[2]["tool_calls"][0]["id"], call_id);
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], call_id);
    assert!(
        messages[3]["content"]
            .as_str()
            .unwrap()
            .contains("\"refunded\":\"A1001\""),
        "{}",
        messages[3]
    );
}

#[tokio::test]
async fn a_denied_refund_does_not_run_and_the_model_is_told() {
    let setup = setup(
        refund_script("Sorry, the refund of A1001 was denied."),
        None,
        "",
    )
    .await;
    let (session, mut stream, suspended) = suspended_refund(&setup).await;
    let call_id = last(&suspended)["payload"]["tool_call_id"].clone();
    setup
        .decide(&session, json!({"approved": false, "approver": "alice"}))
        .await;
    let resumed = turn(&mut stream).await;
    assert_eq!(last(&resumed)["type"], "TURN_ENDED", "{resumed:?}");
    assert_eq!(resumed[0]["type"], "TOOL_APPROVAL_DENIED");
    let result = of_type(&resumed, "TOOL_RESULT")[0];
    assert_eq!(result["payload"]["status"], "denied");
    assert_eq!(result["payload"]["output"], "denied by alice");
    assert_eq!(said(&resumed), ["Sorry, the refund of A1001 was denied."]);

    let messages = setup.messages(1);
    assert_eq!(messages[3]["tool_call_id"], call_id);
    let told = messages[3]["content"].as_str().unwrap();
    assert!(
        told.contains("denied") && told.contains("did not run") && told.contains("alice"),
        "{told}"
    );
}

#[tokio::test]
async fn an_origin_not_on_the_allowlist_is_refused_before_any_request() {
    let setup = setup(
        vec![Reply::text(&["never sent"])],
        Some("https://api.openai.com"),
        "",
    )
    .await;
    let (_session, mut stream) = setup.chat("hi").await;
    let events = turn(&mut stream).await;
    let error = last(&events);
    assert_eq!(error["type"], "TURN_ERROR", "{events:?}");
    assert_eq!(error["payload"]["kind"], "agent_error");
    let expected = format!(
        "the host refused the request to {}: it is not on this deployment's outbound \
         allowlist ([outbound] allow in agenthost.toml)",
        setup.fake.origin()
    );
    assert_eq!(error["payload"]["message"], expected.as_str());
    assert!(setup.fake.received().is_empty(), "the fake saw a request");
    assert!(of_type(&events, "HTTP_REQUEST").is_empty(), "{events:?}");
    assert!(of_type(&events, "HTTP_RESPONSE").is_empty(), "{events:?}");
}

#[tokio::test]
async fn an_upstream_that_hangs_ends_the_turn_at_its_deadline() {
    let setup = setup(vec![Reply::Hang], None, "[limits]\nwall_clock_secs = 3\n").await;
    let (_session, mut stream) = setup.chat("hi").await;
    let events = turn(&mut stream).await;
    let error = last(&events);
    assert_eq!(error["type"], "TURN_ERROR", "{events:?}");
    assert_eq!(error["payload"]["kind"], "deadline", "{error}");
    assert_eq!(setup.fake.received().len(), 1);
    assert_eq!(of_type(&events, "HTTP_REQUEST").len(), 1, "{events:?}");
}

#[tokio::test]
async fn a_rate_limited_request_is_retried() {
    let setup = setup(
        vec![
            Reply::rate_limited(0),
            Reply::rate_limited(0),
            Reply::text(&["Third time lucky."]),
        ],
        None,
        "",
    )
    .await;
    let (_session, mut stream) = setup.chat("hi").await;
    let events = turn(&mut stream).await;
    assert_eq!(last(&events)["type"], "TURN_ENDED", "{events:?}");
    assert_eq!(said(&events), ["Third time lucky."]);
    assert_eq!(setup.fake.received().len(), 3);
    assert_http_journaled(&events, &setup.fake, 3);
    let statuses: Vec<u64> = of_type(&events, "HTTP_RESPONSE")
        .iter()
        .map(|e| e["payload"]["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [429, 429, 200]);
}

#[tokio::test]
async fn provider_errors_malformed_streams_and_endless_tool_calls_end_the_turn() {
    let setup = setup(
        vec![
            Reply::status(401, "Incorrect API key provided: sk-fake-***"),
            Reply::status(
                500,
                "The server had an error while processing your request.",
            ),
            Reply::Stream(vec![json!("not a chunk")]),
            Reply::rate_limited(60),
        ],
        None,
        "",
    )
    .await;
    let (session, mut stream) = setup.chat("hi").await;
    let mut errors = Vec::new();
    for round in 0..4 {
        if round > 0 {
            setup.input(&session, "again").await;
        }
        let events = turn(&mut stream).await;
        let error = last(&events);
        assert_eq!(error["type"], "TURN_ERROR", "{events:?}");
        assert_eq!(error["payload"]["kind"], "agent_error");
        errors.push(error["payload"]["message"].as_str().unwrap().to_string());
    }
    assert_eq!(
        errors[0],
        "the model provider refused the API key (HTTP 401): Incorrect API key provided: \
         sk-fake-***; check the OPENAI_API_KEY secret (PUT /secrets/OPENAI_API_KEY)"
    );
    assert_eq!(
        errors[1],
        "the model provider answered HTTP 500: The server had an error while processing \
         your request."
    );
    assert!(
        errors[2]
            .starts_with("the model's response stream is malformed: chunk 1 is not a JSON object"),
        "{}",
        errors[2]
    );
    assert!(
        errors[3].starts_with("the model provider is rate limiting this agent")
            && errors[3].contains("30 s retry budget"),
        "{}",
        errors[3]
    );
    // Each turn made exactly one request: no retry but on 429, and none beyond the budget.
    assert_eq!(setup.fake.received().len(), 4);

    // A model that keeps asking for tools stops after the loop's 8 rounds.
    let lookup = ("lookup_order", r#"{"order_id":"A1002"}"#);
    setup.fake.push(vec![Reply::tool_calls("", &[lookup]); 8]);
    setup.input(&session, "loop forever").await;
    let events = turn(&mut stream).await;
    let error = last(&events);
    assert_eq!(error["type"], "TURN_ERROR", "{events:?}");
    assert_eq!(
        error["payload"]["message"],
        "the model did not give a final answer within 8 rounds of tool calls \
         (ChatLoop::max_rounds)"
    );
    assert_eq!(of_type(&events, "TOOL_RESULT").len(), 8);
    assert_eq!(setup.fake.received().len(), 12);
}

#[tokio::test]
async fn answers_cut_by_length_or_the_content_filter_end_the_turn_saying_so() {
    let cut = |reason: &str| {
        Reply::Stream(vec![
            chunk(json!({"role": "assistant", "content": ""}), None),
            chunk(json!({"content": "Your order is on its"}), None),
            chunk(json!({}), Some(reason)),
            usage(),
        ])
    };
    let setup = setup(vec![cut("length"), cut("content_filter")], None, "").await;
    let (session, mut stream) = setup.chat("where is A1001?").await;
    let mut messages = Vec::new();
    for round in 0..2 {
        if round > 0 {
            setup.input(&session, "and now?").await;
        }
        let events = turn(&mut stream).await;
        let error = last(&events);
        assert_eq!(error["type"], "TURN_ERROR", "{events:?}");
        // What the model said before it was stopped stays on the record.
        let end: Vec<_> = of_type(&events, "MESSAGE_END")
            .into_iter()
            .filter(|e| e["payload"]["role"] == "assistant")
            .collect();
        assert_eq!(end.len(), 1, "{events:?}");
        assert_eq!(end[0]["payload"]["text"], "Your order is on its");
        messages.push(error["payload"]["message"].as_str().unwrap().to_string());
    }
    assert!(
        messages[0].contains("finish_reason `length`"),
        "{}",
        messages[0]
    );
    assert!(
        messages[1].contains("finish_reason `content_filter`"),
        "{}",
        messages[1]
    );
}
