//! LLM budgets (issue 43, docs/llm.md "Budgets"): the `llm-direct`
//! fixture's model loop under a session's budget, against the fake OpenAI
//! provider. A call whose worst case (request bytes / 4 + `max_tokens`)
//! the budget cannot cover is never sent: the turn ends with
//! BUDGET_REACHED, the session is `paused_budget`, the `budget.reached`
//! webhook is delivered; a PATCH that does not cover it changes nothing, a
//! PATCH that does resumes it (TURN_STARTED `budget_raised`) to TURN_ENDED
//! with exactly one more request, whose conversation holds the user's
//! message once. Runs on redb and on PostgreSQL (`AGENTHOST_TEST_STORE`).

use serde_json::{Value, json};

use crate::support::agents::{TERMINAL, of_type};
use crate::support::fake_openai::{FakeOpenAi, Reply};
use crate::support::{self, KEY, Server};
use crate::webhooks::{FAST, Receiver, create};

/// `PATCH /sessions/{id}` with `body`, as the platform key.
async fn patch(server: &Server, session: &str, body: Value) -> (u16, Value) {
    let response = support::client()
        .patch(server.url(&format!("/sessions/{session}")))
        .bearer_auth(KEY)
        .json(&body)
        .send()
        .await
        .expect("PATCH");
    support::status_and_json(response).await
}

/// The events of `session` from the start, until the terminal event of its
/// turn `turn`.
async fn until_turn(server: &Server, session: &str, turn: usize) -> Vec<Value> {
    let mut stream = server.events(session, None).await;
    let mut events = Vec::new();
    let mut ended = 0;
    while ended < turn {
        let ends = [TERMINAL, &["BUDGET_REACHED"]].concat();
        let more = stream.until(&ends).await;
        ended += 1;
        events.extend(more);
    }
    events
}

#[tokio::test]
async fn a_call_past_the_session_budget_pauses_the_turn_and_raising_it_resumes() {
    let fake = FakeOpenAi::start(vec![Reply::text(&["first"]), Reply::text(&["second"])]).await;
    let dir = support::data_dir();
    let mut flags = vec!["--outbound-allow-private"];
    flags.extend_from_slice(FAST);
    let server = Server::start_with(dir.path(), &flags).await;
    let receiver = Receiver::start();
    let (_, secret) = create(
        &server,
        json!({"url": format!("{}/budget", receiver.url), "events": ["budget.reached"]}),
    )
    .await;
    receiver.config("/budget", &[&secret], 0, 200, 200).await;
    let manifest = format!(
        "[app]\nslug = \"llm\"\n[agent]\nentry = \"llm.wasm\"\n\
         [outbound]\nallow = [\"{}\"]\n\
         [llm]\nbudget_per_session = {{ tokens = 100000 }}\n\
         [llm.main]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-fake\"\nmax_output_tokens = 512\n",
        fake.origin(),
        fake.base_url()
    );
    let component = support::guest("llm-direct");
    server
        .deploy_files(&[("llm.wasm", &component)], &manifest)
        .await;

    // Turn 1 under the manifest's budget: settled to the provider's usage.
    let session = server.session("llm", "/chat", json!("hi")).await;
    let events = until_turn(&server, &session, 1).await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:#?}");
    let (status, view) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        view["usage"],
        json!({"input_tokens": 20, "output_tokens": 7})
    );
    assert_eq!(
        view["budget"],
        json!({"limit": {"tokens": 100000}, "spent": 27.0, "reserved": 0.0})
    );

    // Malformed budgets are refused (422 invalid_body).
    for bad in [
        json!({"budget": {"tokens": 0}}),
        json!({}),
        json!({"budget": {"tokens": 1, "cost": 1.0}}),
    ] {
        let (status, body) = patch(&server, &session, bad.clone()).await;
        assert_eq!(status, 422, "{bad}: {body}");
        assert_eq!(body["error"]["code"], "invalid_body", "{bad}: {body}");
    }

    // `100.0` is an integer to the document (JSON Schema), as schemathesis
    // sends it: lowered below the next call's worst case, turn 2 pauses and
    // nothing is sent.
    let (status, view) = patch(&server, &session, json!({"budget": {"tokens": 100.0}})).await;
    assert_eq!(status, 200, "{view}");
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": "again"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let events = until_turn(&server, &session, 2).await;
    let reached = events.last().unwrap();
    assert_eq!(reached["type"], "BUDGET_REACHED", "{events:#?}");
    let reached = &reached["payload"];
    assert_eq!(reached["scope"], "session");
    assert_eq!(reached["unit"], "tokens");
    assert_eq!(reached["limit"], 100.0);
    assert_eq!(reached["spent"], 27.0);
    assert_eq!(reached["reserved"], 0.0);
    let needed = reached["needed"].as_f64().unwrap();
    assert!(needed > 512.0, "the output cap and the input: {reached}");
    assert_eq!(fake.received().len(), 1, "the refused call was never sent");
    let (_, view) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(view["status"], "paused_budget", "{view}");
    assert_eq!(view["budget"]["needed"], needed, "{view}");
    let (status, page) = server.get("/sessions?status=paused_budget").await;
    assert_eq!(status, 200, "{page}");
    assert!(
        (page["items"].as_array().unwrap().iter()).any(|s| s["session_id"] == session.as_str()),
        "{page}"
    );
    let delivered = receiver
        .wait("/budget", "budget.reached delivered", |log| !log.is_empty())
        .await;
    let body = &delivered[0]["body"];
    assert_eq!(body["type"], "budget.reached", "{body}");
    assert_eq!(body["data"]["session_id"], session.as_str(), "{body}");
    assert_eq!(body["data"]["needed"], needed, "{body}");
    let metrics = server.metrics().await;
    assert!(
        metrics.contains("agenthost_llm_budget_reached_total{app=\"llm\",scope=\"session\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics
            .contains("agenthost_llm_tokens_total{app=\"llm\",alias=\"main\",kind=\"input\"} 20"),
        "{metrics}"
    );

    // A raise that still does not cover it changes nothing but the limit.
    let short = 27 + needed as u64 - 1;
    let (status, view) = patch(&server, &session, json!({"budget": {"tokens": short}})).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["status"], "paused_budget", "{view}");
    // Exactly enough resumes the turn where it stopped.
    let (status, view) = patch(&server, &session, json!({"budget": {"tokens": short + 1}})).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["status"], "running", "{view}");
    let events = until_turn(&server, &session, 3).await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:#?}");
    let started = of_type(&events, "TURN_STARTED");
    assert_eq!(started.len(), 3, "{events:#?}");
    assert_eq!(
        started[2]["payload"]["reason"],
        json!({"kind": "budget_raised"})
    );
    assert_eq!(started[2]["payload"]["input"], "again");
    let received = fake.received();
    assert_eq!(received.len(), 2, "exactly one more request");
    let users: Vec<&Value> = (received[1].body["messages"].as_array().unwrap().iter())
        .filter(|m| m["role"] == "user")
        .map(|m| &m["content"])
        .collect();
    assert_eq!(users, ["hi", "again"], "the user's message once");
    let (_, view) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(view["status"], "idle", "{view}");
    assert_eq!(view["usage"]["input_tokens"], 40, "{view}");
    assert_eq!(view["budget"]["reserved"], 0.0, "{view}");
}
