//! `agenthost bench`: a short run of every phase against the real server and
//! the `examples/bench` agent gives a complete, consistent JSON report (no
//! timing is asserted).

use serde_json::Value;

use crate::support::{self, KEY, Server};

#[tokio::test]
async fn bench_runs_every_phase_and_reports_valid_json() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let component = support::guest("bench");
    let manifest =
        std::fs::read_to_string(support::workspace().join("examples/bench/agenthost.toml"))
            .expect("read the bench manifest");
    server
        .deploy_files(&[("bench.wasm", &component)], &manifest)
        .await;

    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_agenthost"))
        .args(["bench", "--url", &server.url, "--api-key", KEY])
        .args(["--duration", "1s", "--concurrency", "2", "--deltas", "10"])
        .args(["--replay-events", "2000", "--idle-streams", "20"])
        .args(["--approvals", "3", "--json"])
        .env("RUST_LOG", "warn")
        .output()
        .await
        .expect("run agenthost bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "bench failed:\n{stderr}\n{stdout}");
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n{stderr}"));

    assert_eq!(report["app"], "bench");
    assert_eq!(report["url"], server.url.as_str());
    let config = &report["config"];
    for (field, value) in [
        ("concurrency", 2),
        ("deltas", 10),
        ("replay_events", 2000),
        ("idle_streams", 20),
        ("approvals", 3),
    ] {
        assert_eq!(config[field], value, "config.{field}");
    }
    assert_eq!(config["duration_secs"], 1.0);
    assert!(config["turns"].is_null());
    // The bench runs with a platform key against a server that has
    // `/metrics`: an unread metrics endpoint is a failure, never a reason to
    // check less (`null` server figures are only for servers without it).
    assert_eq!(
        report["metrics_available"], true,
        "the bench could not read GET /metrics"
    );

    let load = &report["load"];
    for field in ["sessions", "turns", "events"] {
        assert!(count(load, field) > 0, "load.{field}: {load}");
    }
    assert!(count(load, "events") >= count(load, "turns") * 10);
    for field in ["seconds", "turns_per_sec", "events_per_sec"] {
        assert!(number(load, field) > 0.0, "load.{field}");
    }
    latency(&load["first_delta"]);
    latency(&load["turn"]);
    latency(&load["followup_first_delta"]);
    assert_eq!(count(&load["turn"], "count"), count(load, "sessions"));
    let figures = &load["resources"]["server"];
    assert!(count(figures, "journal_events") > 0, "{figures}");
    assert!(count(&figures["instantiate"], "count") > 0, "{figures}");
    resources(&load["resources"]);

    let replay = &report["replay"];
    assert!(replay["session_id"].is_string());
    // 2000 deltas, their message's start and end, and the turn's lifecycle.
    let events = count(replay, "events");
    assert!(events > 2000, "{replay}");
    assert_eq!(count(&replay["from_start"], "events"), events);
    let middle = count(&replay["from_middle"], "events");
    assert!(middle > 0 && middle < events, "{replay}");
    for read in ["from_start", "from_middle"] {
        for field in ["seconds", "first_event_ms", "events_per_sec"] {
            assert!(number(&replay[read], field) >= 0.0, "replay.{read}.{field}");
        }
    }
    assert!(number(replay, "write_seconds") > 0.0);
    assert!(number(replay, "write_events_per_sec") > 0.0);
    resources(&replay["write_resources"]);
    resources(&replay["resources"]);

    let idle = &report["idle"];
    assert_eq!(count(idle, "requested"), 20);
    assert_eq!(count(idle, "opened"), 20, "{idle}");
    assert!(idle["error"].is_null(), "{idle}");
    assert!(number(idle, "open_seconds") >= 0.0);
    for field in [
        "rss_before_bytes",
        "rss_after_bytes",
        "rss_per_stream_bytes",
    ] {
        let value = &idle[field];
        assert!(value.is_number(), "idle.{field}: {value}");
    }
    assert!(count(idle, "server_streams_open") >= 20, "{idle}");
    resources(&idle["resources"]);

    let approval = &report["approval"];
    assert_eq!(count(approval, "sessions"), 3);
    for field in ["to_turn_started", "to_tool_result", "to_turn_ended"] {
        latency(&approval[field]);
        assert_eq!(count(&approval[field], "count"), 3, "approval.{field}");
    }
    let p50 = |field: &str| number(&approval[field], "p50_ms");
    assert!(p50("to_turn_started") <= p50("to_turn_ended"));
    resources(&approval["resources"]);

    // The table (without --json) names every phase.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_agenthost"))
        .args(["bench", "--url", &server.url, "--api-key", KEY])
        .args(["--turns", "2", "--deltas", "3", "--replay-events", "0"])
        .args(["--idle-streams", "0", "--approvals", "1"])
        .output()
        .await
        .expect("run agenthost bench");
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{table}");
    assert!(table.contains("POST /sessions → first delta"), "{table}");
    assert!(table.contains("POST approval → TURN_STARTED"), "{table}");
    assert!(!table.contains("replay"), "{table}");
}

fn count(object: &Value, field: &str) -> u64 {
    object[field]
        .as_u64()
        .unwrap_or_else(|| panic!("`{field}` is not a count: {object}"))
}

fn number(object: &Value, field: &str) -> f64 {
    object[field]
        .as_f64()
        .unwrap_or_else(|| panic!("`{field}` is not a number: {object}"))
}

/// A latency summary with samples, its percentiles in order.
fn latency(summary: &Value) {
    assert!(count(summary, "count") > 0, "{summary}");
    let [p50, p90, p99, max, mean] =
        ["p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms"].map(|f| number(summary, f));
    assert!(
        0.0 <= p50 && p50 <= p90 && p90 <= p99 && p99 <= max,
        "{summary}"
    );
    assert!(mean <= max, "{summary}");
}

/// A phase's resources: every field present, the server's as numbers (read
/// from its `/metrics`).
fn resources(resources: &Value) {
    assert!(number(resources, "seconds") >= 0.0, "{resources}");
    assert!(
        number(&resources["client"], "cpu_seconds") >= 0.0,
        "{resources}"
    );
    assert!(
        resources["client"]["cpu_percent"].is_number(),
        "{resources}"
    );
    let server = &resources["server"];
    for field in ["cpu_seconds", "cpu_percent", "rss_bytes", "journal_events"] {
        let value = server
            .get(field)
            .unwrap_or_else(|| panic!("server.{field} missing: {server}"));
        assert!(value.is_number(), "server.{field}: {server}");
    }
    assert!(server["rss_bytes"].is_u64(), "{server}");
    assert!(server["journal_events"].is_u64(), "{server}");
    for field in ["instantiate", "journal_commit", "commit_batch"] {
        let histogram = server
            .get(field)
            .unwrap_or_else(|| panic!("server.{field} missing: {server}"));
        let count = count(histogram, "count");
        for quantity in ["mean", "p50", "p99"] {
            let value = &histogram[quantity];
            assert!(
                if count > 0 {
                    value.is_number()
                } else {
                    value.is_null()
                },
                "server.{field}.{quantity}: {server}"
            );
        }
        if count > 0 {
            assert!(
                number(histogram, "p50") <= number(histogram, "p99"),
                "{server}"
            );
        }
    }
}
