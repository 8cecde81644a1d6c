//! What the server logs, read from its stderr: a guest's output stays on its
//! own log line whatever it holds (a forged newline included), a log that
//! is not a terminal carries no colour codes, and a log that cannot be
//! written (a full disk) fails no request.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{self, Server};

#[tokio::test]
async fn guest_output_cannot_forge_log_lines_and_the_log_has_no_colour_codes() {
    let dir = support::data_dir();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("stderr.log");
    let server = Server::start_logging_to(dir.path(), &log, &[("RUST_LOG", "info")]).await;
    server.deploy("rogue", &support::guest("rogue")).await;
    // What a user could make an agent that prints its input say.
    let forged = "2026-11-26T00:00:00.000000Z  INFO agenthost::api: FORGED key rotated";
    let session = server
        .session("rogue", "/say", json!(format!("hi\n{forged}")))
        .await;
    let events = server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED"])
        .await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:?}");

    // The output is logged once the turn is over: both streams.
    let started = Instant::now();
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap();
        if text.matches("FORGED").count() >= 2 {
            break text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the guest's output was never logged:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("FORGED")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    for (line, stream) in lines.iter().zip(["stdout", "stderr"]) {
        // One line each, the guest's, with the newline shown escaped.
        assert!(line.contains("agenthost::guest"), "{line}");
        assert!(line.contains(&format!("stream=\"{stream}\"")), "{line}");
        assert!(line.contains(&format!("{stream}: hi\\n{forged}")), "{line}");
    }
    assert!(
        !text.contains('\u{1b}'),
        "escape codes in a log that is not a terminal:\n{text}"
    );
}

/// Every request is logged at `info` after its response is made; with the
/// log on a full disk (`/dev/full`: every write fails with ENOSPC) each one
/// must still be answered. tracing reports a failed write with `eprintln!`,
/// which panics when stderr fails: the request's task died with it.
#[tokio::test]
async fn a_log_that_cannot_be_written_fails_no_request() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let dir = support::data_dir();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agenthost"));
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--addr", "127.0.0.1:0"]);
    if let Some(url) = support::postgres_store(dir.path()) {
        command
            .args(["--store", &url])
            .env("AGENTHOST_MASTER_KEY", support::TEST_MASTER_KEY);
    }
    let mut child = command
        .env("RUST_LOG", "info")
        .env("AGENTHOST_BOOTSTRAP_KEY", support::KEY)
        .stdout(Stdio::piped())
        .stderr(full)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let url = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref() {
            if let Some(url) = line.unwrap().strip_prefix("agenthost listening on ") {
                std::thread::spawn(move || for _ in lines {});
                return url.trim().to_string();
            }
        }
        panic!("agenthost exited before listening");
    })
    .await
    .unwrap();
    let client = support::client();
    for i in 0..20 {
        let answer = client
            .get(format!("{url}/apps"))
            .bearer_auth(support::KEY)
            .send()
            .await;
        let status = answer.map(|a| a.status().as_u16());
        assert!(
            matches!(status, Ok(200)),
            "request {i} with the log on a full disk: {status:?}"
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}
