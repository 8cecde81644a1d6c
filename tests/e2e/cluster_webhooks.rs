//! Webhooks on two hosts sharing one PostgreSQL database: both send, and
//! each delivery is attempted by one host at a time (a lease in its row),
//! so every event reaches the receiver once, verified by the Standard
//! Webhooks reference library (tests/webhooks/receiver.py).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{self, Server};
use crate::webhooks::{FAST, Receiver, create, deliveries};

fn delivered(text: &str) -> u64 {
    (text.lines())
        .find_map(|line| {
            line.strip_prefix("agenthost_webhook_attempts_total{outcome=\"delivered\"} ")
        })
        .map_or(0, |n| n.trim().parse().unwrap())
}

#[tokio::test]
async fn two_hosts_deliver_each_event_once() {
    let (dir_a, dir_b) = (support::data_dir(), support::data_dir());
    let name = dir_a
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_lowercase();
    let db: String = format!("webhooks_{name}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let a = Server::start_host_with(dir_a.path(), &db, FAST).await;
    let b = Server::start_host_with(dir_b.path(), &db, FAST).await;
    let receiver = Receiver::start();
    let url = format!("{}/both", receiver.url);
    let (id, secret) = create(&a, json!({"url": url, "events": ["turn.ended"]})).await;
    receiver.config("/both", &[&secret], 0, 500, 200).await;
    a.deploy("hello", &support::guest("hello")).await;

    // Twenty turns, half on each host.
    let mut sessions = Vec::new();
    for i in 0..20 {
        let host = if i % 2 == 0 { &a } else { &b };
        sessions.push((host, host.session("hello", "/chat", json!("hi")).await));
    }
    for (host, session) in &sessions {
        host.events(session, None)
            .await
            .until(&["TURN_ENDED"])
            .await;
    }
    let started = Instant::now();
    let stored: Vec<Value> = loop {
        let stored = deliveries(&b, &id).await;
        if stored.len() == 20 && stored.iter().all(|d| d["state"] == "delivered") {
            break stored;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{stored:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let log = receiver.log("/both").await;
    assert_eq!(log.len(), 20, "one delivery per event: {log:#?}");
    let mut ids: Vec<&str> = log.iter().map(|d| d["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 20);
    assert!(log.iter().all(|d| d["verified"] == json!([0])));
    assert!(
        stored.iter().all(|d| d["attempt_count"] == 1),
        "{stored:#?}"
    );
    // Between them the hosts made exactly one attempt per delivery.
    let total = delivered(&a.metrics().await) + delivered(&b.metrics().await);
    assert_eq!(total, 20);
}
