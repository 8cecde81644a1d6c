//! The session's own end user and its schedules (docs/schedules.md, "End
//! users' schedules"): where the app's manifest says `[end_users]
//! schedules = true`, an end user (a minted token, or a JWT of the app's
//! identity provider) sets one-shot `at` schedules on their own session,
//! which fire once as turns with reason `schedule`; lists the session's
//! schedules with who made each (`created_by`); deletes only those an end
//! user made (not the agent's timers, not the platform's). Another end user
//! gets 404 on the session's schedules, the bare invocation key 403, an app
//! that does not allow it 403 `schedules_not_allowed`, a `cron` body 403
//! `cron_not_allowed`. Each creation counts against the user's
//! `turns_per_minute_per_user` (429 past it) and the session's 100
//! schedules. On both engines, with the `timers` fixture (its agent sets
//! timers of its own).
//!
//! "Fired once" is shown by order, not by waiting: a later schedule's turn
//! is awaited, and the journal up to it holds exactly the turns expected.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::idp::{ISSUER, Idp, claims};
use crate::support::{self, Server, bundle, from_now, sample};

/// The manifest of app `slug` (the `timers` fixture) with these `[end_users]` lines.
fn manifest(slug: &str, end_users: &str) -> String {
    format!("[app]\nslug = \"{slug}\"\n[agent]\nentry = \"agent.wasm\"\n[end_users]\n{end_users}")
}

async fn deploy(server: &Server, manifest: &str) {
    let component = support::guest("timers");
    server
        .deploy_files(&[("agent.wasm", &component)], manifest)
        .await;
}

/// A session of `app` created with `token`, whose first turn (with
/// `input`) has ended.
async fn session_of(server: &Server, token: &str, app: &str, input: Value) -> String {
    let body = json!({"app": app, "route": "/timers", "input": input});
    let (status, created) = server.post_as(token, "/sessions", body).await;
    assert_eq!(status, 201, "{created}");
    let session = created["session_id"].as_str().unwrap().to_string();
    (server.events(&session, None).await)
        .until(&["TURN_ENDED"])
        .await;
    session
}

const HOUR_MS: u64 = 3_600_000;

fn path(session: &str) -> String {
    format!("/sessions/{session}/schedules")
}

/// `POST /sessions/{id}/schedules` with `token`.
async fn schedule(server: &Server, token: &str, session: &str, body: Value) -> (u16, Value) {
    server.post_as(token, &path(session), body).await
}

/// `DELETE /sessions/{id}/schedules/{schedule}` with `token`.
async fn delete(server: &Server, token: &str, session: &str, schedule: &str) -> (u16, Value) {
    let url = server.url(&format!("{}/{schedule}", path(session)));
    let response = server.client.delete(url).bearer_auth(token).send().await;
    support::status_and_json(response.unwrap()).await
}

fn code(answer: &(u16, Value)) -> (u16, &str) {
    (answer.0, answer.1["error"]["code"].as_str().unwrap_or(""))
}

fn id(schedule: &Value) -> &str {
    schedule["id"].as_str().unwrap()
}

/// Each TURN_STARTED's (turn, reason).
fn starts(events: &[Value]) -> Vec<(u64, Value)> {
    (events.iter())
        .filter(|e| e["type"] == "TURN_STARTED")
        .map(|e| {
            (
                e["payload"]["turn"].as_u64().unwrap(),
                e["payload"]["reason"].clone(),
            )
        })
        .collect()
}

/// Each (schedule id, created_by) of `GET /sessions/{id}/schedules` as `token`.
async fn listed(server: &Server, token: &str, session: &str) -> Vec<(String, String)> {
    let (status, list) = server.get_as(token, &path(session)).await;
    assert_eq!(status, 200, "{list}");
    (list.as_array().unwrap().iter())
        .map(|s| {
            let by = s["created_by"].as_str().unwrap_or_else(|| panic!("{s}"));
            (id(s).to_string(), by.to_string())
        })
        .collect()
}

#[tokio::test]
async fn an_end_user_schedules_on_their_own_session_and_it_fires_once() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy(&server, &manifest("tasks", "schedules = true\n")).await;
    let ada = server.end_user_token("tasks", "ada").await;
    // Her session's first turn sets an agent timer an hour ahead.
    let timer = json!({"schedule_ms": HOUR_MS, "then": {"say": "agent"}});
    let session = session_of(&server, &ada, "tasks", timer).await;
    let (_, agent) = server.get(&path(&session)).await;
    let agent = agent[0].clone();
    assert_eq!(agent["created_by"], "agent", "{agent}");
    let platform = schedule(
        &server,
        support::KEY,
        &session,
        json!({"at": from_now(HOUR_MS), "input": {"say": "platform"}}),
    )
    .await;
    assert_eq!(platform.0, 201, "{}", platform.1);
    assert_eq!(platform.1["created_by"], "platform", "{}", platform.1);
    let platform = platform.1;

    // Hers: two that fire, one she deletes before it is due.
    let mine = |say: &str, ms| json!({"at": from_now(ms), "input": {"say": say}});
    let (status, first) = schedule(&server, &ada, &session, mine("first", 2_000)).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(
        (&first["session_id"], &first["created_by"]),
        (&json!(session), &json!("end_user")),
        "{first}"
    );
    let (status, second) = schedule(&server, &ada, &session, mine("second", 3_000)).await;
    assert_eq!(status, 201, "{second}");
    let (status, dropped) = schedule(&server, &ada, &session, mine("dropped", HOUR_MS)).await;
    assert_eq!(status, 201, "{dropped}");

    // She sees every schedule of her session and who made it.
    let mut all = vec![
        (id(&first).to_string(), "end_user".to_string()),
        (id(&second).to_string(), "end_user".to_string()),
        (id(&agent).to_string(), "agent".to_string()),
        (id(&platform).to_string(), "platform".to_string()),
        (id(&dropped).to_string(), "end_user".to_string()),
    ];
    let mut seen = listed(&server, &ada, &session).await;
    all.sort();
    seen.sort();
    assert_eq!(seen, all);
    assert_eq!(listed(&server, support::KEY, &session).await.len(), 5);

    // She deletes hers, not the agent's timer nor the platform's schedule.
    for other in [&agent, &platform] {
        let answer = delete(&server, &ada, &session, id(other)).await;
        assert_eq!(
            code(&answer),
            (403, "schedule_not_deletable"),
            "{}",
            answer.1
        );
    }
    assert_eq!(delete(&server, &ada, &session, id(&dropped)).await.0, 204);
    let again = delete(&server, &ada, &session, id(&dropped)).await;
    assert_eq!(code(&again), (404, "schedule_not_found"), "{}", again.1);

    // Hers fire in order, once each, as turns with the schedule's reason.
    let events = server.journal(&session, 3).await;
    let fired = |s: &Value| json!({"kind": "schedule", "schedule_id": s["id"]});
    assert_eq!(
        starts(&events),
        [
            (1, json!({"kind": "input"})),
            (2, fired(&first)),
            (3, fired(&second)),
        ]
    );
    // The agent got their inputs as inputs.
    let said = crate::support::agents::said(&events);
    assert_eq!(said[1..], ["ran first", "ran second"], "{said:?}");
    let mut left = listed(&server, &ada, &session).await;
    left.sort();
    let mut expected = vec![
        (id(&agent).to_string(), "agent".to_string()),
        (id(&platform).to_string(), "platform".to_string()),
    ];
    expected.sort();
    assert_eq!(left, expected);
    // The platform's key deletes any.
    for other in [&agent, &platform] {
        let answer = delete(&server, support::KEY, &session, id(other)).await;
        assert_eq!(answer.0, 204, "{}", answer.1);
    }
}

#[tokio::test]
async fn another_end_user_and_the_bare_key_reach_no_schedules_of_a_users_session() {
    // Ada authenticates with the app's identity provider, Bob with a
    // minted token: both are end users of the app.
    let idp = Idp::start();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--allow-insecure-jwks"]).await;
    let provider = format!(
        "schedules = true\njwks_url = \"{}/jwks\"\nissuer = \"{ISSUER}\"\naudience = \"tasks-api\"\n",
        idp.url
    );
    deploy(&server, &manifest("tasks", &provider)).await;
    let ada = idp.token("ada", "tasks-api").await;
    let bob = server.end_user_token("tasks", "bob").await;
    let (_, bare) = server
        .mint_key("invocation", "frontend", Some("tasks"))
        .await;
    let session = session_of(&server, &ada, "tasks", json!({"say": "hi"})).await;
    let body = json!({"at": from_now(HOUR_MS), "input": {"say": "hers"}});
    let (status, hers) = schedule(&server, &ada, &session, body.clone()).await;
    assert_eq!(status, 201, "{hers}");
    assert_eq!(hers["created_by"], "end_user", "{hers}");

    // Bob: her session does not exist for him (as for its other routes).
    let not_found = (404, "session_not_found");
    let answer = schedule(&server, &bob, &session, body.clone()).await;
    assert_eq!(code(&answer), not_found, "{}", answer.1);
    let answer = server.get_as(&bob, &path(&session)).await;
    assert_eq!(code(&answer), not_found, "{}", answer.1);
    let answer = delete(&server, &bob, &session, id(&hers)).await;
    assert_eq!(code(&answer), not_found, "{}", answer.1);
    let answer = server.get_as(&bob, &format!("/sessions/{session}")).await;
    assert_eq!(code(&answer), not_found, "{}", answer.1);
    // Nor a session the platform made, for Ada.
    let platforms = session_of(&server, support::KEY, "tasks", json!({"say": "hi"})).await;
    let answer = schedule(&server, &ada, &platforms, body.clone()).await;
    assert_eq!(code(&answer), not_found, "{}", answer.1);

    // The bare invocation key, which every end user of the frontend holds:
    // refused on every schedule route, on any session.
    for session in [&session, &platforms] {
        let answer = schedule(&server, &bare, session, body.clone()).await;
        assert_eq!(code(&answer), (403, "forbidden"), "{}", answer.1);
        let answer = server.get_as(&bare, &path(session)).await;
        assert_eq!(code(&answer), (403, "forbidden"), "{}", answer.1);
        let answer = delete(&server, &bare, session, id(&hers)).await;
        assert_eq!(code(&answer), (403, "forbidden"), "{}", answer.1);
    }

    // A recurring schedule is the app backend's, not an end user's.
    let cron = json!({"cron": "* * * * * *", "input": {"say": "every second"}});
    let answer = schedule(&server, &ada, &session, cron.clone()).await;
    assert_eq!(code(&answer), (403, "cron_not_allowed"), "{}", answer.1);
    let cron_until = json!({"cron": "0 9 * * *", "timezone": "Europe/Berlin",
        "end_at": "2030-01-01T00:00:00Z", "input": {}});
    let answer = schedule(&server, &ada, &session, cron_until).await;
    assert_eq!(code(&answer), (403, "cron_not_allowed"), "{}", answer.1);
    // Hers alone is there: nothing else was made.
    assert_eq!(
        listed(&server, &ada, &session).await,
        [(id(&hers).to_string(), "end_user".to_string())]
    );
    // A platform key may still set one.
    let answer = schedule(&server, support::KEY, &session, cron).await;
    assert_eq!(answer.0, 201, "{}", answer.1);
    assert_eq!(answer.1["created_by"], "platform", "{}", answer.1);
    let answer = delete(&server, support::KEY, &session, id(&answer.1)).await;
    assert_eq!(answer.0, 204, "{}", answer.1);
    // Her JWT without the app's audience is not hers.
    let stranger = idp
        .sign("rsa1", "RS256", claims("ada", "another-api"))
        .await;
    let answer = server.get_as(&stranger, &path(&session)).await;
    assert_eq!(answer.0, 401, "{}", answer.1);
}

#[tokio::test]
async fn an_app_must_allow_its_end_users_schedules() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy(&server, &manifest("tasks", "")).await;
    let ada = server.end_user_token("tasks", "ada").await;
    let session = session_of(&server, &ada, "tasks", json!({"say": "hi"})).await;
    let platform = schedule(
        &server,
        support::KEY,
        &session,
        json!({"at": from_now(HOUR_MS), "input": {}}),
    )
    .await;
    assert_eq!(platform.0, 201, "{}", platform.1);
    let body = json!({"at": from_now(HOUR_MS), "input": {"say": "hers"}});
    let refused = (403, "schedules_not_allowed");
    let answer = schedule(&server, &ada, &session, body.clone()).await;
    assert_eq!(code(&answer), refused, "{}", answer.1);
    let answer = server.get_as(&ada, &path(&session)).await;
    assert_eq!(code(&answer), refused, "{}", answer.1);
    let answer = delete(&server, &ada, &session, id(&platform.1)).await;
    assert_eq!(code(&answer), refused, "{}", answer.1);
    // Nothing was made; the platform's is still there.
    assert_eq!(listed(&server, support::KEY, &session).await.len(), 1);

    // The app's current deployment decides: one saying so lets her.
    deploy(&server, &manifest("tasks", "schedules = true\n")).await;
    let (status, hers) = schedule(&server, &ada, &session, body).await;
    assert_eq!(status, 201, "{hers}");
    assert_eq!(listed(&server, &ada, &session).await.len(), 2);
}

#[tokio::test]
async fn an_end_users_schedules_count_against_their_turns_and_the_sessions_cap() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let policy = "schedules = true\nturns_per_minute_per_user = 3\n";
    deploy(&server, &manifest("tasks", policy)).await;
    let ada = server.end_user_token("tasks", "ada").await;
    // Her turn 1 of the minute.
    let session = session_of(&server, &ada, "tasks", json!({"say": "hi"})).await;
    let body = || json!({"at": from_now(HOUR_MS), "input": {"say": "hers"}});
    // The session's 100, with the platform's 99 (which are not her turns).
    let mut platforms = Vec::new();
    for _ in 0..99 {
        let (status, made) = schedule(&server, support::KEY, &session, body()).await;
        assert_eq!(status, 201, "{made}");
        platforms.push(made);
    }
    // Her turn 2: the 100th.
    let (status, hers) = schedule(&server, &ada, &session, body()).await;
    assert_eq!(status, 201, "{hers}");
    // The 101st: refused for the session's cap, and her place given back.
    let answer = schedule(&server, &ada, &session, body()).await;
    assert_eq!(code(&answer), (429, "too_many_schedules"), "{}", answer.1);
    assert_eq!(
        delete(&server, support::KEY, &session, id(&platforms[0]))
            .await
            .0,
        204
    );
    assert_eq!(
        delete(&server, support::KEY, &session, id(&platforms[1]))
            .await
            .0,
        204
    );
    // Her turn 3.
    let (status, made) = schedule(&server, &ada, &session, body()).await;
    assert_eq!(status, 201, "{made}");
    // A fourth within the minute: 429 as her input would be, with when to retry.
    let url = server.url(&path(&session));
    let response = server.client.post(url).bearer_auth(&ada).json(&body());
    let response = response.send().await.unwrap();
    let retry_after = (response.headers().get("retry-after"))
        .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
    let answer = support::status_and_json(response).await;
    assert_eq!(code(&answer), (429, "quota_exceeded"), "{}", answer.1);
    assert!(
        (answer.1["error"]["message"].as_str().unwrap()).contains("turns_per_minute_per_user"),
        "{}",
        answer.1
    );
    assert!(
        retry_after.is_some_and(|s| (1..=60).contains(&s)),
        "{retry_after:?}"
    );
    let (status, body) = server
        .post_as(
            &ada,
            &format!("/sessions/{session}/input"),
            json!({"input": {"say": "x"}}),
        )
        .await;
    assert_eq!(
        code(&(status, body.clone())),
        (429, "quota_exceeded"),
        "{body}"
    );
    // 99 of the session's schedules: nothing more was made.
    assert_eq!(listed(&server, &ada, &session).await.len(), 99);
}

/// An end user's schedule fires under the app's caps for what ships in
/// frontends, as their input would: while the app is at
/// `--invocation-max-running-turns-per-app`, it waits (counted in
/// `agenthost_schedules_deferred_total`) where a platform key's fires.
#[tokio::test]
async fn an_end_users_schedule_fires_under_the_apps_caps_for_frontends() {
    let dir = support::data_dir();
    let flags = ["--invocation-max-running-turns-per-app", "1"];
    let server = Server::start_with(dir.path(), &flags).await;
    let component = support::guest("slow");
    let manifest = "[app]\nslug = \"naps\"\n[agent]\nentry = \"agent.wasm\"\n\
                    [end_users]\nschedules = true\n";
    let (status, row) = server
        .upload(bundle(&[("agent.wasm", &component)]), manifest)
        .await;
    assert_eq!(status, 202, "{row}");
    assert_eq!(server.wait_built(&row).await["status"], "active");
    let ada = server.end_user_token("naps", "ada").await;
    let create = |token: &str, sleep_ms: u64| {
        let body = json!({"app": "naps", "route": "/slow", "input": {"sleep_ms": sleep_ms}});
        let token = token.to_string();
        let server = &server;
        async move {
            let (status, created) = server.post_as(&token, "/sessions", body).await;
            assert_eq!(status, 201, "{created}");
            created["session_id"].as_str().unwrap().to_string()
        }
    };
    let hers = create(&ada, 1).await;
    let platforms = create(support::KEY, 1).await;
    for session in [&hers, &platforms] {
        (server.events(session, None).await)
            .until(&["TURN_ENDED"])
            .await;
    }
    // The app's one running turn (a platform key's, held until cancelled).
    let busy = create(support::KEY, 600_000).await;
    (server.events(&busy, None).await)
        .until(&["MESSAGE_DELTA"])
        .await;
    let due_now = || json!({"at": from_now(0), "input": {"sleep_ms": 1}});
    let fired_second = |session: &str, schedule: Value| {
        let session = session.to_string();
        let server = &server;
        async move {
            let mut stream = server.events(&session, None).await;
            stream.until(&["TURN_ENDED"]).await;
            let second = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
            assert_eq!(
                second[0]["payload"]["reason"],
                json!({"kind": "schedule", "schedule_id": schedule["id"]}),
                "{second:?}"
            );
            assert_eq!(second.last().unwrap()["type"], "TURN_ENDED", "{second:?}");
        }
    };

    // A platform key's schedule fires at once: not held to that cap.
    let (status, theirs) = schedule(&server, support::KEY, &platforms, due_now()).await;
    assert_eq!(status, 201, "{theirs}");
    fired_second(&platforms, theirs).await;
    let before = sample(
        &server.metrics().await,
        "agenthost_schedules_deferred_total",
    );

    // Hers waits while the app is at the cap: tried, put off, still listed.
    let (status, mine) = schedule(&server, &ada, &hers, due_now()).await;
    assert_eq!(status, 201, "{mine}");
    let start = std::time::Instant::now();
    while sample(
        &server.metrics().await,
        "agenthost_schedules_deferred_total",
    ) < before + 2.0
    {
        assert!(start.elapsed() < Duration::from_secs(60), "never put off");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        listed(&server, &ada, &hers).await,
        [(id(&mine).to_string(), "end_user".to_string())]
    );
    let (_, view) = server.get(&format!("/sessions/{hers}")).await;
    assert_eq!(view["turn"], 1, "{view}");
    // The running turn ends: hers fires.
    let (status, body) = server
        .post(&format!("/sessions/{busy}/cancel"), json!({}))
        .await;
    assert!(status == 200 || status == 202, "{status} {body}");
    fired_second(&hers, mine).await;
}
