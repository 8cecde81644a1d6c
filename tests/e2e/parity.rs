//! The three SDKs, scenario by scenario: every scenario of
//! `tests/sdk/parity.toml` (input, decisions, the events each turn must
//! have) run against each language's agent, the same texts expected of
//! Rust, Python and TypeScript. The same file's points are the parity table
//! of docs/agents.md (the tidy test keeps them equal), so each row's
//! `checked_by` names scenarios that run here in all three languages.
//!
//! One server per language; each distinct (agent, manifest) is deployed
//! once; the scenarios run one after another, and a failure names the
//! language, the scenario and the step.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::support::agents::{self, last, of_type, said, server, turn};
use crate::support::fake_openai::{FakeOpenAi, Reply};
use crate::support::{self, Server, bundle, types};

/// The scenario table, as the tidy test also reads it.
const TABLE: &str = include_str!("../sdk/parity.toml");

#[derive(Deserialize)]
struct Table {
    scenario: Vec<Scenario>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    name: String,
    agent: String,
    route: String,
    #[serde(default)]
    manifest: String,
    #[serde(default)]
    secrets: BTreeMap<String, String>,
    /// The model's answers, in order: a scenario with a model gets its own
    /// fake OpenAI-compatible server, its secrets and its origin allowed.
    #[serde(default)]
    model: Vec<ModelReply>,
    step: Vec<Step>,
}

/// One scripted answer of the model: streamed `text` parts, or `say` (may
/// be empty) then the tool `calls` ([name, arguments JSON text]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelReply {
    text: Option<Vec<String>>,
    say: Option<String>,
    calls: Option<Vec<(String, String)>>,
}

impl ModelReply {
    fn reply(&self) -> Reply {
        match (&self.text, &self.calls) {
            (Some(parts), None) => {
                let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
                Reply::text(&parts)
            }
            (None, Some(calls)) => {
                let calls: Vec<(&str, &str)> = (calls.iter())
                    .map(|(name, args)| (name.as_str(), args.as_str()))
                    .collect();
                Reply::tool_calls(self.say.as_deref().unwrap_or_default(), &calls)
            }
            _ => panic!("a [[scenario.model]] has `text`, or `calls` (and `say`)"),
        }
    }
}

/// One step and what the turn it starts must show (tests/sdk/parity.toml's
/// header says what each field checks).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    input: Option<String>,
    decide: Option<Value>,
    #[serde(default)]
    new_session: bool,
    route: Option<String>,
    as_user: Option<Value>,
    ends: Option<String>,
    types: Option<Vec<String>>,
    kind: Option<String>,
    message_contains: Option<String>,
    required: Option<serde_json::Map<String, Value>>,
    agent_deltas: Option<Vec<String>>,
    said: Option<Vec<String>>,
    results: Option<Vec<(String, Value)>>,
    counts: Option<BTreeMap<String, usize>>,
    status: Option<String>,
    model_saw: Option<Vec<(usize, String, Value)>>,
    model_was_told: Option<String>,
}

#[derive(Clone, Copy)]
enum Lang {
    Rust,
    Python,
    TypeScript,
}

impl Lang {
    fn short(self) -> &'static str {
        match self {
            Lang::Rust => "rs",
            Lang::Python => "py",
            Lang::TypeScript => "ts",
        }
    }

    /// The manifest's `[agent]` lines and the bundle of `agent` in this language.
    fn agent(self, agent: &str) -> (String, Vec<u8>) {
        let dir = |rust: &str, other: &str| match self {
            Lang::Rust => rust.to_string(),
            Lang::Python => format!("{other}/python/{agent}"),
            Lang::TypeScript => format!("{other}/typescript/{agent}"),
        };
        let project = match agent {
            "hello" => dir("hello", "examples"),
            "checks" => dir("checks", "tests/fixtures"),
            "assistant" => dir("assistant", "examples"),
            other => panic!(
                "tests/sdk/parity.toml names the agent `{other}`: hello, checks or assistant"
            ),
        };
        match self {
            Lang::Rust => {
                let component = support::guest(&project);
                let entry = format!("{project}.wasm");
                let bundle = bundle(&[(entry.as_str(), &component)]);
                (format!("[agent]\nentry = \"{entry}\"\n"), bundle)
            }
            Lang::Python => {
                let component = crate::python::python_guest(&project);
                let bundle = bundle(&[("agent.wasm", component.as_slice())]);
                ("[agent]\nlanguage = \"python\"\n".into(), bundle)
            }
            Lang::TypeScript => {
                let component = crate::typescript::typescript_guest(&project);
                let bundle = bundle(&[("agent.wasm", component.as_slice())]);
                ("[agent]\nlanguage = \"typescript\"\n".into(), bundle)
            }
        }
    }
}

/// Runs every scenario against `lang`'s agents on one server.
async fn run_every_scenario(lang: Lang) {
    let table: Table = toml::from_str(TABLE).expect("tests/sdk/parity.toml parses");
    let dir = support::data_dir();
    // The fake model listens on 127.0.0.1.
    let server = server(dir.path(), &["--outbound-allow-private"]).await;
    let mut apps: HashMap<(String, String), String> = HashMap::new();
    for scenario in &table.scenario {
        let model = model(&server, scenario).await;
        let mut manifest = scenario.manifest.clone();
        if let Some((_, lines)) = &model {
            manifest.push_str(lines);
        }
        let key = (scenario.agent.clone(), manifest.clone());
        let next = apps.len();
        let slug = match apps.get(&key) {
            Some(slug) => slug.clone(),
            None => {
                let slug = format!("{}{next}-{}", scenario.agent, lang.short());
                deploy(&server, lang, &slug, &scenario.agent, &manifest).await;
                apps.insert(key, slug.clone());
                slug
            }
        };
        for (name, value) in &scenario.secrets {
            let (status, body) = server.put_secret(name, value).await;
            assert!(status == 201 || status == 200, "{body}");
        }
        run(
            &server,
            &slug,
            scenario,
            model.as_ref().map(|(fake, _)| fake),
            lang,
        )
        .await;
    }
}

/// The scenario's fake model and the manifest lines that point the agent
/// at it (its secrets set).
async fn model(server: &Server, scenario: &Scenario) -> Option<(FakeOpenAi, String)> {
    if scenario.model.is_empty() {
        return None;
    }
    let fake = FakeOpenAi::start(scenario.model.iter().map(ModelReply::reply).collect()).await;
    let lines = fake.configure(server).await;
    Some((fake, lines))
}

async fn deploy(server: &Server, lang: Lang, slug: &str, agent: &str, manifest: &str) {
    let (agent_lines, bundle) = lang.agent(agent);
    let manifest = format!("[app]\nslug = \"{slug}\"\n{agent_lines}{manifest}");
    let _turn = agents::DEPLOYS.lock().await;
    let (status, row) = server.upload(bundle, &manifest).await;
    assert_eq!(status, 202, "{row}");
    let row = server.wait_built(&row).await;
    assert_eq!(row["status"], "active", "{row}");
}

/// Runs `scenario`'s steps on the app `slug`.
async fn run(
    server: &Server,
    slug: &str,
    scenario: &Scenario,
    model: Option<&FakeOpenAi>,
    lang: Lang,
) {
    let mut session = String::new();
    let mut stream = None;
    for (n, step) in scenario.step.iter().enumerate() {
        let at = format!(
            "{} agent, scenario `{}`, step {}",
            lang.short(),
            scenario.name,
            n + 1
        );
        match (&step.input, &step.decide) {
            (Some(text), None) if session.is_empty() || step.new_session => {
                let route = step.route.as_deref().unwrap_or(&scenario.route);
                session = create(server, slug, route, text, step.as_user.as_ref(), &at).await;
                stream = Some(server.events(&session, None).await);
            }
            (Some(text), None) => agents::input(server, &session, text).await,
            (None, Some(decision)) => agents::decide(server, &session, decision.clone()).await,
            _ => panic!("{at}: a step has exactly one of `input` and `decide`"),
        }
        let stream = stream.as_mut().expect("the first step creates the session");
        let events = turn(stream).await;
        check(server, &session, step, &events, &at).await;
        check_model(model, step, &at);
    }
}

/// Creates a session on `route` with `text`, as the end user `as_user`
/// names (a token minted for it) or with the platform key.
async fn create(
    server: &Server,
    slug: &str,
    route: &str,
    text: &str,
    as_user: Option<&Value>,
    at: &str,
) -> String {
    let Some(user) = as_user else {
        return server.session(slug, route, json!(text)).await;
    };
    let token = server.end_user_token_with(slug, user.clone()).await;
    let body = json!({"app": slug, "route": route, "input": text});
    let (status, created) = server.post_as(&token, "/sessions", body).await;
    assert_eq!(status, 201, "{at}: {created}");
    created["session_id"].as_str().unwrap().to_string()
}

/// The agent's deltas: those of messages it opened (not the user's).
fn agent_deltas(events: &[Value]) -> Vec<String> {
    let ours: Vec<&Value> = of_type(events, "MESSAGE_START")
        .into_iter()
        .filter(|e| e["payload"]["role"] == "assistant")
        .map(|e| &e["payload"]["message_id"])
        .collect();
    of_type(events, "MESSAGE_DELTA")
        .into_iter()
        .filter(|e| ours.contains(&&e["payload"]["message_id"]))
        .filter_map(|e| e["payload"]["delta"]["text"].as_str().map(String::from))
        .collect()
}

async fn check(server: &Server, session: &str, step: &Step, events: &[Value], at: &str) {
    let end = last(events);
    let seen = types(events);
    let ctx = format!("{at}: the turn was {seen:?}, ending {end}");
    if let Some(ends) = &step.ends {
        assert_eq!(end["type"], *ends, "{ctx}");
    }
    if let Some(expected) = &step.types {
        assert_eq!(&seen, expected, "{ctx}");
    }
    if let Some(kind) = &step.kind {
        assert_eq!(end["payload"]["kind"], *kind, "{ctx}");
    }
    if let Some(text) = &step.message_contains {
        let message = end["payload"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(text.as_str()), "{ctx}");
    }
    for (field, value) in step.required.iter().flatten() {
        assert_eq!(
            &end["payload"][field], value,
            "{ctx}: payload field `{field}`"
        );
    }
    if let Some(expected) = &step.agent_deltas {
        assert_eq!(&agent_deltas(events), expected, "{ctx}");
    }
    if let Some(expected) = &step.said {
        assert_eq!(&said(events), expected, "{ctx}");
    }
    if let Some(expected) = &step.results {
        let results: Vec<(String, Value)> = of_type(events, "TOOL_RESULT")
            .iter()
            .map(|r| {
                let status = r["payload"]["status"].as_str().unwrap_or_default();
                (status.to_string(), r["payload"]["output"].clone())
            })
            .collect();
        assert_eq!(&results, expected, "{ctx}");
    }
    for (kind, count) in step.counts.iter().flatten() {
        assert_eq!(of_type(events, kind).len(), *count, "{ctx}: {kind} events");
    }
    if let Some(status) = &step.status {
        let (_, record) = server.get(&format!("/sessions/{session}")).await;
        assert_eq!(record["status"], *status, "{ctx}: {record}");
    }
}

/// What the fake model received: `model_saw` (request index, JSON pointer
/// into its body, value), `model_was_told` (the last message of the latest
/// request has this content); every request carried the key.
fn check_model(model: Option<&FakeOpenAi>, step: &Step, at: &str) {
    if step.model_saw.is_none() && step.model_was_told.is_none() {
        return;
    }
    let received = model
        .unwrap_or_else(|| panic!("{at}: checks the model, but the scenario has none"))
        .received();
    for request in &received {
        assert_eq!(
            request.authorization.as_deref(),
            Some("Bearer sk-fake-test-key"),
            "{at}"
        );
    }
    for (n, pointer, value) in step.model_saw.iter().flatten() {
        let body = &received
            .get(*n)
            .unwrap_or_else(|| panic!("{at}: no request {n}"))
            .body;
        assert_eq!(
            body.pointer(pointer),
            Some(value),
            "{at}: request {n}'s {pointer} in {body}"
        );
    }
    if let Some(told) = &step.model_was_told {
        let body = &received.last().expect("a request").body;
        let last = body["messages"].as_array().and_then(|m| m.last());
        assert_eq!(
            last.map(|m| &m["content"]),
            Some(&json!(told)),
            "{at}: {body}"
        );
    }
}

#[tokio::test]
async fn rust_agents_run_every_scenario() {
    run_every_scenario(Lang::Rust).await;
}

#[tokio::test]
async fn python_agents_run_every_scenario() {
    run_every_scenario(Lang::Python).await;
}

#[tokio::test]
async fn typescript_agents_run_every_scenario() {
    run_every_scenario(Lang::TypeScript).await;
}
