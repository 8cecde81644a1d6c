//! Timers across hosts (docs/schedules.md, docs/scale-out.md): three hosts
//! on one PostgreSQL, sessions on all of them, each with a timer its agent
//! set (`tests/fixtures/timers`) and two schedules from the API, due over a
//! few seconds; one host is killed with SIGKILL at a random moment among
//! them. Every timer fires exactly once: each schedule id has exactly one
//! TURN_STARTED with reason `schedule`, whichever host fired it, the killed
//! one's included (another host fires what it left due, and settles what
//! it left running within the lease).
//!
//! This always runs on PostgreSQL (`scripts/test` skips it in its
//! PostgreSQL pass: it ran already).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{self, Server, from_now};

const SESSIONS_PER_HOST: usize = 6;

/// A database of its own for this test's hosts.
fn database(dir: &tempfile::TempDir) -> String {
    let name = dir.path().file_name().unwrap().to_string_lossy();
    let name: String = (name.to_lowercase().chars())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("cluster_timers_{name}")
}

/// Waits (a bound, not an assertion of time) until `session` has no
/// schedule left and no turn running or queued, as `host` sees it; then
/// returns its journal.
async fn settled_journal(host: &Server, session: &str) -> Vec<Value> {
    let start = Instant::now();
    let turns = loop {
        let (_, listed) = host.get(&format!("/sessions/{session}/schedules")).await;
        let (_, record) = host.get(&format!("/sessions/{session}")).await;
        let idle = matches!(record["status"].as_str(), Some("idle" | "errored"));
        if listed == json!([]) && idle && record.get("queued_inputs").is_none() {
            break record["turn"].as_u64().unwrap();
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{listed} {record}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let mut stream = host.events(session, None).await;
    let mut events = Vec::new();
    for _ in 0..turns {
        events.extend(stream.until(&["TURN_ENDED", "TURN_ERROR"]).await);
    }
    events
}

#[tokio::test]
async fn every_timer_fires_exactly_once_across_hosts_when_one_is_killed() {
    let dirs = [
        support::data_dir(),
        support::data_dir(),
        support::data_dir(),
    ];
    let db = database(&dirs[0]);
    let mut hosts = Vec::new();
    for dir in &dirs {
        hosts.push(Server::start_host(dir.path(), &db).await);
    }
    let row = hosts[0].deploy("timers", &support::guest("timers")).await;
    assert_eq!(row["status"], "active", "{row}");

    // Sessions on every host: an agent timer each, and two API schedules,
    // due between 1.5 and 5 s from now.
    let mut expected: Vec<(String, String)> = Vec::new(); // (session, schedule id)
    for i in 0..SESSIONS_PER_HOST * hosts.len() {
        let host = &hosts[i % hosts.len()];
        let ms = 1_500 + (i as u64 * 137) % 2_000;
        let input = json!({"schedule_ms": ms, "then": {"say": format!("agent {i}")}});
        let session = host.session("timers", "/timers", input).await;
        let first = host
            .events(&session, None)
            .await
            .until(&["TURN_ENDED", "TURN_ERROR"])
            .await;
        let said = crate::support::agents::said(&first);
        let id = said[0].strip_prefix("scheduled ").expect("scheduled");
        expected.push((session.clone(), id.to_string()));
        for j in 0..2u64 {
            let at = from_now(2_000 + (i as u64 * 211 + j * 997) % 3_000);
            let body = json!({"at": at, "input": {"say": format!("api {i}.{j}")}});
            let path = format!("/sessions/{session}/schedules");
            let (status, created) = host.post(&path, body).await;
            assert_eq!(status, 201, "{created}");
            expected.push((session.clone(), created["id"].as_str().unwrap().to_string()));
        }
    }

    // One host dies at a random moment while they come due.
    let pause = rand::Rng::random_range(&mut rand::rng(), 1_000..4_000);
    tokio::time::sleep(Duration::from_millis(pause)).await;
    let victim = rand::Rng::random_range(&mut rand::rng(), 0..hosts.len());
    hosts.remove(victim).kill();
    eprintln!("killed host {victim} after {pause} ms");

    // Every schedule id: exactly one TURN_STARTED with reason `schedule`.
    let survivor = &hosts[0];
    let mut fired: HashMap<String, usize> = HashMap::new();
    let mut sessions: Vec<&String> = expected.iter().map(|(s, _)| s).collect();
    sessions.dedup();
    for session in sessions {
        for event in settled_journal(survivor, session).await {
            let reason = &event["payload"]["reason"];
            if event["type"] == "TURN_STARTED" && reason["kind"] == "schedule" {
                let id = reason["schedule_id"].as_str().unwrap().to_string();
                *fired.entry(id).or_default() += 1;
            }
        }
    }
    let wrong: Vec<(&String, usize)> = (expected.iter())
        .map(|(_, id)| (id, fired.get(id).copied().unwrap_or(0)))
        .filter(|(_, n)| *n != 1)
        .collect();
    assert!(wrong.is_empty(), "fired other than once: {wrong:?}");
    assert_eq!(fired.len(), expected.len(), "{fired:?}");
}
