//! schemathesis against the live server and its own `GET /openapi.json`:
//! every operation, every check (no 5xx, statuses, content types, headers
//! and bodies as documented, schema-valid data accepted and invalid data
//! refused), with the exceptions in `tests/api-fuzz/schemathesis.toml`.
//!
//! Ignored by `cargo test`: `scripts/test` runs it in its own phase ("api
//! fuzz") with `--ignored --nocapture`, so schemathesis' counts are in the
//! log. It finds schemathesis through `AGENTHOST_SCHEMATHESIS`
//! (`scripts/prereqs/50-schemathesis.sh`).

use std::process::Command;

use serde_json::json;

use crate::support::{self, KEY, Server};

/// How long schemathesis may fuzz (its `--max-time`); `AGENTHOST_FUZZ_SECS`
/// overrides it.
const DEFAULT_SECS: &str = "90";

#[tokio::test]
#[ignore = "run by scripts/test in its \"api fuzz\" phase"]
async fn schemathesis_finds_nothing_the_document_does_not_allow() {
    let Some(st) = std::env::var_os("AGENTHOST_SCHEMATHESIS") else {
        panic!(
            "AGENTHOST_SCHEMATHESIS is not set: run scripts/test, or first \
             `source scripts/prereqs/50-schemathesis.sh`"
        );
    };
    let dir = support::data_dir();
    // The fuzzer's unauthenticated probes (thousands a minute, from one
    // address) would trip the throttle of failed authentication, tested
    // in tests/e2e/keys.rs, and every later request would get 429.
    let server = Server::start_with(dir.path(), &["--auth-failures-per-minute", "0"]).await;
    // Data to reach: two apps, sessions idle and awaiting an approval.
    server.deploy("hello", &support::guest("hello")).await;
    server.deploy("ops", &support::guest("ops")).await;
    let idle = server.session("hello", "/chat", json!("hi")).await;
    let gated = server
        .session("ops", "/ops", json!("add apples pears"))
        .await;
    for session in [&idle, &gated] {
        server
            .events(session, None)
            .await
            .until(&["TURN_ENDED", "TOOL_APPROVAL_REQUIRED"])
            .await;
    }

    let config = support::workspace().join("tests/api-fuzz/schemathesis.toml");
    let secs = std::env::var("AGENTHOST_FUZZ_SECS").unwrap_or_else(|_| DEFAULT_SECS.into());
    let url = server.url("/openapi.json");
    let status = tokio::task::spawn_blocking(move || {
        Command::new(st)
            .arg("--no-color")
            .arg("--config-file")
            .arg(config)
            .args(["run", &url, "--max-time", &secs])
            .args(["-H", &format!("Authorization: Bearer {KEY}")])
            .status()
            .expect("run schemathesis")
    })
    .await
    .expect("wait for schemathesis");
    assert!(
        status.success(),
        "schemathesis found responses the document does not allow (above)"
    );
}
