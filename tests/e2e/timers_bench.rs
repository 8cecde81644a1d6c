//! A benchmark, not a test (`#[ignore]`, run by hand; BENCHMARKS.md): the
//! idle CPU and memory of a server holding 10,000 pending schedules (100
//! sessions of `slow` with 100 each, due in 2099), against the same server
//! before they were made. Prints the figures; asserts only that every
//! schedule was made.
//!
//! ```sh
//! cargo test -p agenthost --test e2e -- --ignored timers_bench --nocapture
//! ```

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

use crate::support::{self, Server};

const SESSIONS: usize = 100;
const PER_SESSION: usize = 100;
/// How long the idle server is watched.
const WATCH: Duration = Duration::from_secs(30);

/// The process's CPU time so far (user + system, clock ticks of 10 ms) and
/// its resident memory in KiB, from /proc.
fn cpu_and_rss(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command's closing parenthesis; utime and stime are the 14th and 15th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = (status.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap();
    (ticks, rss)
}

/// CPU milliseconds per second while idle for `WATCH`, and the RSS after it.
async fn idle(server: &Server) -> (f64, u64) {
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (before, _) = cpu_and_rss(server.pid());
    tokio::time::sleep(WATCH).await;
    let (after, rss) = cpu_and_rss(server.pid());
    let ms = (after - before) as f64 * 10.0 / WATCH.as_secs_f64();
    (ms, rss)
}

#[tokio::test]
#[ignore = "a benchmark: run by hand (BENCHMARKS.md)"]
async fn timers_bench_idle_server_with_10000_pending_schedules() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("slow", &support::guest("slow")).await;
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        let session = server
            .session("slow", "/slow", json!({"sleep_ms": 1}))
            .await;
        (server.events(&session, None).await)
            .until(&["TURN_ENDED"])
            .await;
        sessions.push(session);
    }
    let (cpu_empty, rss_empty) = idle(&server).await;

    let posts = (sessions.iter())
        .flat_map(|s| (0..PER_SESSION).map(move |n| (s.clone(), n)))
        .map(|(session, n)| {
            let server = &server;
            async move {
                let body = json!({"at": "2099-12-01T09:00:00Z", "input": {"sleep_ms": 1, "n": n}});
                server
                    .post(&format!("/sessions/{session}/schedules"), body)
                    .await
                    .0
            }
        });
    let statuses: Vec<u16> = futures::stream::iter(posts)
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(statuses.iter().all(|s| *s == 201), "not all made");
    let (cpu_full, rss_full) = idle(&server).await;
    eprintln!(
        "idle over {WATCH:?}: {} sessions, no schedules: {cpu_empty:.2} ms CPU/s, RSS {rss_empty} KiB; \
         {} pending schedules: {cpu_full:.2} ms CPU/s, RSS {rss_full} KiB",
        SESSIONS,
        statuses.len()
    );
}
