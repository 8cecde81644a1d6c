//! Crash consistency: concurrent streaming sessions, `kill -9` at random
//! points, restarts on the same data dir. Independent SSE clients record
//! what they saw; after the last restart the journal must hold exactly
//! that (same ids and seqs), without gaps, every interrupted turn must be
//! closed (or run again), and every accepted turn must have run or failed.
//! Rounds alternate redb's commit modes on the same file (one phase, then
//! `--journal-quick-repair`), so each crash is repaired both ways.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use serde_json::{Value, json};

use crate::support::{self, KEY, Server, status_and_json};

#[derive(Default)]
pub(crate) struct Seen {
    /// event id → (session, seq), as some client received it.
    pub(crate) events: HashMap<String, (String, u64)>,
    /// session → turn numbers the server accepted (201/202).
    pub(crate) accepted: HashMap<String, Vec<u64>>,
    /// Streams that skipped or repeated a seq.
    pub(crate) broken_streams: Vec<String>,
}

/// One client: a session of its own, turns one after another (at most
/// `turns`), each streamed to its end; stops at the first failure (the
/// server was killed).
pub(crate) async fn client(
    url: String,
    seen: Arc<Mutex<Seen>>,
    mut session: Option<String>,
    turns: usize,
) -> Option<String> {
    let http = support::client();
    let words: Vec<String> = (0..rand::rng().random_range(50..400))
        .map(|i| format!("w{i}"))
        .collect();
    let input = json!(words.join(" "));
    for _ in 0..turns {
        let (turn, id) = match &session {
            None => {
                let body = json!({"app": "hello", "route": "/chat", "input": input});
                let response = http
                    .post(format!("{url}/sessions"))
                    .bearer_auth(KEY)
                    .json(&body)
                    .send()
                    .await
                    .ok()?;
                let (status, body) = status_and_json(response).await;
                if status != 201 {
                    return None;
                }
                (1, body["session_id"].as_str()?.to_string())
            }
            Some(id) => {
                let response = http
                    .post(format!("{url}/sessions/{id}/input"))
                    .bearer_auth(KEY)
                    .json(&json!({"input": input}))
                    .send()
                    .await
                    .ok()?;
                let (status, body) = status_and_json(response).await;
                if status != 202 {
                    return session;
                }
                (body["turn"].as_u64()?, id.clone())
            }
        };
        seen.lock()
            .unwrap()
            .accepted
            .entry(id.clone())
            .or_default()
            .push(turn);
        session = Some(id.clone());
        let response = http
            .get(format!("{url}/sessions/{id}/events"))
            .bearer_auth(KEY)
            .send()
            .await
            .ok()?;
        let mut stream = support::EventStream::new(response);
        let mut previous: Option<u64> = None;
        loop {
            let event = stream.try_next(Duration::from_secs(20)).await;
            let Some(event) = event else { return session };
            let (eid, seq) = (event["id"].as_str()?.to_string(), event["seq"].as_u64()?);
            if previous.is_some_and(|p| seq != p + 1) {
                seen.lock()
                    .unwrap()
                    .broken_streams
                    .push(format!("{id}: {previous:?} then {seq}"));
            }
            previous = Some(seq);
            seen.lock().unwrap().events.insert(eid, (id.clone(), seq));
            let terminal = matches!(event["type"].as_str(), Some("TURN_ENDED" | "TURN_ERROR"));
            if terminal && event["payload"]["turn"].as_u64() == Some(turn) {
                break;
            }
        }
    }
    session
}

/// Reads a session's whole journal once its latest turn has ended.
pub(crate) async fn journal(server: &Server, session: &str) -> Vec<Value> {
    let mut record = Value::Null;
    for _ in 0..600 {
        let (_, r) = server.get(&format!("/sessions/{session}")).await;
        record = r;
        if record["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_ne!(record["status"], "running", "{session} never settled");
    let turn = record["turn"].as_u64().unwrap();
    let mut stream = server.events(session, None).await;
    let mut all = Vec::new();
    loop {
        let event = stream.next(Duration::from_secs(30)).await.expect("replay");
        let terminal = matches!(event["type"].as_str(), Some("TURN_ENDED" | "TURN_ERROR"));
        let last = terminal && event["payload"]["turn"].as_u64() == Some(turn);
        all.push(event);
        if last {
            return all;
        }
    }
}

#[tokio::test]
async fn kill_9_at_random_points_loses_nothing_a_client_saw() {
    let dir = support::data_dir();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut sessions: Vec<Option<String>> = vec![None; 8];
    for round in 0..4 {
        let server = if round % 2 == 1 {
            Server::start_with(dir.path(), &["--journal-quick-repair"]).await
        } else {
            Server::start(dir.path()).await
        };
        if round == 0 {
            server.deploy("hello", &support::guest("hello")).await;
        }
        let clients: Vec<_> = sessions
            .iter()
            .cloned()
            .map(|session| {
                tokio::spawn(client(
                    server.url.clone(),
                    seen.clone(),
                    session,
                    usize::MAX,
                ))
            })
            .collect();
        let pause = rand::rng().random_range(100..1200);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        server.kill();
        for (slot, handle) in sessions.iter_mut().zip(clients) {
            if let Ok(Some(session)) = handle.await {
                *slot = Some(session);
            }
        }
    }

    let server = Server::start(dir.path()).await;
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let (sessions, turns, interrupted) = check_survivors(&seen, &[&server]).await;
    eprintln!(
        "crash test: {sessions} sessions, {turns} accepted turns, {interrupted} closed by a restart, {} events seen by clients",
        seen.events.len()
    );
}

/// What a crash test checks once the servers are up again, reading each
/// session through one of `readers` (round robin) and sending it input
/// through the next: (a) every event a client received is in the journal
/// with the same id and seq; (b) seqs run from 0 with no gap and no stream
/// skipped or repeated one; (c) every session accepts input at once; (d)
/// every accepted turn started and ended (ran, or recorded as failed).
/// Returns the sessions, the accepted turns and the turns a restart closed.
pub(crate) async fn check_survivors(seen: &Seen, readers: &[&Server]) -> (usize, usize, usize) {
    assert!(
        !seen.events.is_empty() && !seen.accepted.is_empty(),
        "the workload ran"
    );
    assert!(seen.broken_streams.is_empty(), "{:?}", seen.broken_streams);
    let mut journals = HashMap::new();
    for (i, session) in seen.accepted.keys().enumerate() {
        let reader = readers[i % readers.len()];
        journals.insert(session.clone(), journal(reader, session).await);
    }
    for (i, (session, events)) in journals.iter().enumerate() {
        for (i, event) in events.iter().enumerate() {
            assert_eq!(event["seq"], i as u64, "{session}: a gap or a duplicate");
        }
        for turn in &seen.accepted[session] {
            let has = |kind: &str| {
                events
                    .iter()
                    .any(|e| e["type"] == kind && e["payload"]["turn"] == *turn)
            };
            assert!(
                has("TURN_STARTED"),
                "{session}: accepted turn {turn} never started"
            );
            assert!(
                has("TURN_ENDED") || has("TURN_ERROR"),
                "{session}: turn {turn} never ended"
            );
        }
        let (status, body) = readers[(i + 1) % readers.len()]
            .post(
                &format!("/sessions/{session}/input"),
                json!({"input": "after"}),
            )
            .await;
        assert_eq!(status, 202, "{session}: {body}");
    }
    for (id, (session, seq)) in &seen.events {
        let event = &journals[session][*seq as usize];
        assert_eq!(
            event["id"],
            id.as_str(),
            "{session} seq {seq} changed identity"
        );
    }
    let interrupted = journals
        .values()
        .flatten()
        .filter(|e| e["payload"]["kind"] == "host_restarted")
        .count();
    let turns = seen.accepted.values().map(Vec::len).sum();
    (journals.len(), turns, interrupted)
}
