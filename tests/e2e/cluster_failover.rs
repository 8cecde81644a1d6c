//! The primary dies (docs/scale-out.md, "High availability"): a PostgreSQL
//! primary with a synchronous streaming standby (`pg_basebackup -R`), two
//! hosts on a multi-host URL (`target_session_attrs=read-write`) under
//! load from clients on both; the primary is killed with SIGKILL and the
//! standby promoted. Meanwhile the hosts answer 503 `unavailable`; then
//! they find the new primary by themselves: every event any client saw is
//! still there with the same id and seq, every acknowledged input
//! survives, no stream shows a gap or a duplicate, no session stays stuck,
//! and a new session runs a turn. The time from the promotion to the first
//! successful turn is printed (not asserted).
//!
//! This always runs on PostgreSQL (`scripts/test` skips it in its
//! PostgreSQL pass: it ran already).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::crash::{Seen, Target, check_survivors, client};
use crate::support::pg_cluster::Replicated;
use crate::support::{self, Server};

/// Starts a session of `hello` on `host` and streams its turn: whether it
/// ended with TURN_ENDED (`None`: the request was refused).
async fn one_turn(host: &Server, input: &str) -> Option<Vec<Value>> {
    let body = json!({"app": "hello", "route": "/chat", "input": input});
    let (status, created) = host.post("/sessions", body).await;
    if status != 201 {
        return None;
    }
    let session = created["session_id"].as_str()?.to_string();
    let events = host
        .events(&session, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    Some(events)
}

#[tokio::test]
async fn the_primary_dies_and_the_hosts_go_on_with_the_promoted_standby() {
    let (pg, url) = tokio::task::spawn_blocking(|| Replicated::new("failover"))
        .await
        .unwrap();
    let pg = Arc::new(pg);
    let (dir_a, dir_b) = (support::data_dir(), support::data_dir());
    let a = Server::start_on_with(dir_a.path(), &url, &[]).await;
    let b = Server::start_on_with(dir_b.path(), &url, &[]).await;
    a.deploy("hello", &support::guest("hello")).await;
    let before = one_turn(&b, "before").await.expect("a turn before");
    assert_eq!(before.last().unwrap()["type"], "TURN_ENDED", "{before:?}");

    // Clients on both hosts, turns one after another.
    let seen = Arc::new(Mutex::new(Seen::default()));
    let targets = [Target::new(&a.url), Target::new(&b.url)];
    let clients: Vec<_> = (0..6)
        .map(|i| tokio::spawn(client(targets[i % 2].clone(), seen.clone(), None)))
        .collect();
    let pause = rand::Rng::random_range(&mut rand::rng(), 300..1500);
    tokio::time::sleep(Duration::from_millis(pause)).await;
    targets[0].wait_mid_turn().await;
    targets[1].wait_mid_turn().await;
    // From here a client's failure is the outage's, not a defect.
    for target in &targets {
        target.dying.store(true, Ordering::SeqCst);
        target.stop.store(true, Ordering::SeqCst);
    }
    let killing = pg.clone();
    tokio::task::spawn_blocking(move || killing.kill_primary())
        .await
        .unwrap();

    // No primary: both hosts refuse new work with 503 `unavailable`.
    let body = json!({"app": "hello", "route": "/chat", "input": "during"});
    for host in [&a, &b] {
        let started = Instant::now();
        loop {
            let (status, error) = host.post("/sessions", body.clone()).await;
            if status == 503 {
                assert_eq!(error["error"]["code"], "unavailable", "{error}");
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{} still answers {status} {error} with no primary",
                host.url
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let promoting = pg.clone();
    tokio::task::spawn_blocking(move || promoting.promote())
        .await
        .unwrap();
    let promoted = Instant::now();
    // The hosts find the new primary by themselves (no restart).
    let first = loop {
        if let Some(events) = one_turn(&a, "after the failover").await
            && events.last().unwrap()["type"] == "TURN_ENDED"
        {
            break promoted.elapsed();
        }
        assert!(
            promoted.elapsed() < Duration::from_secs(120),
            "no turn ran within 120 s of the promotion"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let on_b = loop {
        if let Some(events) = one_turn(&b, "on b too").await
            && events.last().unwrap()["type"] == "TURN_ENDED"
        {
            break promoted.elapsed();
        }
        assert!(
            promoted.elapsed() < Duration::from_secs(120),
            "no turn ran on B within 120 s of the promotion"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    // The clients' streams end: a turn cut by the outage is settled (its
    // lease expires and the rules of a restart apply) once there is a
    // primary again.
    for handle in clients {
        tokio::time::timeout(Duration::from_secs(120), handle)
            .await
            .expect("a client's stream never ended after the failover")
            .expect("a client panicked");
    }

    // Nothing acknowledged is lost, no stream had a gap, nothing is stuck.
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let (sessions, turns, interrupted) = check_survivors(&seen, &[&a, &b]).await;
    eprintln!(
        "failover: first turn {:.2} s after the promotion (on A; on B {:.2} s); {sessions} sessions, {turns} accepted turns, {interrupted} closed host_restarted, {} events seen",
        first.as_secs_f64(),
        on_b.as_secs_f64(),
        seen.events.len()
    );
}
