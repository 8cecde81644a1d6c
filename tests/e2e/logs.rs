//! What the server logs, read from its stderr: a guest's output stays on its
//! own log line whatever it holds (a forged newline included), and a log
//! that is not a terminal carries no colour codes.

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
