//! The default caps for what ships in frontends
//! (docs/limits.md#rate-limits-and-quotas): with no flag set, an app's
//! invocation key may not start a turn while the app has 64 running
//! (`--invocation-max-running-turns-per-app`, 429 `quota_exceeded` naming
//! the flag), while a platform key still may; once the turns end, the key
//! gets in again.

use serde_json::json;

use crate::support::hold::Hold;
use crate::support::{self, Server};

/// `--invocation-max-running-turns-per-app`'s default.
const DEFAULT_RUNNING: usize = 64;

#[tokio::test]
async fn invocation_keys_meet_a_default_cap_on_an_apps_running_turns() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    let hold = Hold::start().await;
    hold.deploy_fetch(&server).await;
    let (_, key) = server.mint_key("invocation", "web", Some("fetch")).await;
    let create = |input| json!({"app": "fetch", "route": "/fetch", "input": input});
    // DEFAULT_RUNNING turns held on the upstream, started by the key.
    for _ in 0..DEFAULT_RUNNING {
        let (status, body) = server
            .post_as(&key, "/sessions", create(hold.input()))
            .await;
        assert_eq!(status, 201, "{body}");
    }
    hold.wait_arrived(DEFAULT_RUNNING).await;
    let (status, refused) = server
        .post_as(&key, "/sessions", create(hold.input()))
        .await;
    assert_eq!(status, 429, "{refused}");
    assert_eq!(refused["error"]["code"], "quota_exceeded", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "--invocation-max-running-turns-per-app {DEFAULT_RUNNING}"
        )),
        "{message}"
    );
    // A platform key is not held to it.
    let (status, body) = server.post("/sessions", create(json!({"url": "x"}))).await;
    assert_eq!(status, 201, "{body}");
    // Once the turns end, the key gets in again.
    hold.release();
    let mut status = 0;
    for _ in 0..600 {
        let (s, _) = server
            .post_as(&key, "/sessions", create(json!({"url": "x"})))
            .await;
        status = s;
        if s == 201 {
            break;
        }
        assert_eq!(s, 429);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, 201);
}
