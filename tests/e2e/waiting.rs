//! Turns waiting for a slot hold no inputs (docs/limits.md#concurrency-and-queues):
//! with the one slot held by a turn that waits on a held upstream, 200
//! turns with inputs of almost 1 MiB each wait behind it, and the server's
//! resident memory (`VmRSS` of `/proc/<pid>/status`) grows by far less than
//! their inputs; once the slot frees, every turn runs with its own input
//! (each GETs the upstream path its input names).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::hold::Hold;
use crate::support::{self, Server};

/// Turns that wait, and each one's padding (the input stays under the 1 MiB body cap).
const WAITING: usize = 200;
const PAD: usize = 1_000_000;

/// The server's resident memory in MiB.
fn rss_mib(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .expect("read /proc/<pid>/status");
    let kib: u64 = (status.lines())
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<pid>/status");
    kib >> 10
}

/// Creates a `fetch` session whose turn GETs `path` of the upstream,
/// with `PAD` bytes of padding in its input.
async fn waiting_turn(server: &Server, hold: &Hold, path: &str, pad: &str) -> String {
    let input = json!({"url": format!("{}{path}", hold.origin), "pad": pad});
    server.session("fetch", "/fetch", input).await
}

#[tokio::test]
async fn turns_waiting_for_a_slot_hold_no_inputs_and_each_runs_with_its_own() {
    let dir = support::data_dir();
    let server = Server::start_with(
        dir.path(),
        &[
            "--max-concurrent-turns",
            "1",
            "--max-queued-turns",
            "0",
            "--outbound-allow-private",
            // The journal's own page cache stays out of the measure.
            "--journal-cache-mb",
            "8",
        ],
    )
    .await;
    let hold = Hold::start().await;
    hold.deploy_fetch(&server).await;
    // The one slot: a turn held on the upstream.
    let first = server.session("fetch", "/fetch", hold.input()).await;
    hold.wait_arrived(1).await;
    let pad = "p".repeat(PAD);
    // A few first, so what the server allocates once is in the baseline.
    let mut sessions = Vec::new();
    for i in 0..10 {
        let path = format!("/turn/{i}");
        sessions.push((waiting_turn(&server, &hold, &path, &pad).await, path));
    }
    let before = rss_mib(&server);
    for i in 10..WAITING {
        let path = format!("/turn/{i}");
        sessions.push((waiting_turn(&server, &hold, &path, &pad).await, path));
    }
    // They are all waiting: only the first turn reached the upstream.
    assert_eq!(hold.arrived(), 1);
    for (session, _) in &sessions[..3] {
        let (status, body) = server.get(&format!("/sessions/{session}")).await;
        assert_eq!((status, body["status"].as_str()), (200, Some("running")));
    }
    let grown = rss_mib(&server).saturating_sub(before);
    let inputs_mib = ((WAITING - 10) * PAD) as u64 >> 20;
    println!(
        "{} waiting turns with {inputs_mib} MiB of inputs: RSS grew by {grown} MiB",
        WAITING - 10
    );
    assert!(
        grown < inputs_mib / 3,
        "RSS grew by {grown} MiB while turns with {inputs_mib} MiB of inputs waited"
    );

    // Once the slot frees, each turn runs with its own input, in order.
    hold.release();
    let deadline = Instant::now() + Duration::from_secs(120);
    for (session, _) in std::iter::once(&(first, String::new())).chain(&sessions) {
        loop {
            let (status, body) = server.get(&format!("/sessions/{session}")).await;
            assert_eq!(status, 200, "{body}");
            if body["status"] == "idle" {
                break;
            }
            assert_ne!(body["status"], "errored", "{body}");
            assert!(Instant::now() < deadline, "the turns never all ran: {body}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let paths = hold.paths();
    assert_eq!(paths.len(), WAITING + 1, "{paths:?}");
    let expected: Vec<&String> = sessions.iter().map(|(_, path)| path).collect();
    assert_eq!(paths[1..].iter().collect::<Vec<_>>(), expected);
    assert_eq!(paths.iter().collect::<BTreeSet<_>>().len(), WAITING + 1);
    // The journal's reply names the upstream's answer.
    let events = server
        .events(&sessions[WAITING - 1].0, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    let said = crate::support::agents::said(&events);
    assert_eq!(said, ["status=200 bytes=8 body=released"], "{events:?}");
}
