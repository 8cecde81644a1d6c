//! The default caps for what ships in frontends
//! (docs/limits.md#rate-limits-and-quotas): with no flag set, an app's
//! invocation key may not start a turn while the app has 64 running
//! (`--invocation-max-running-turns-per-app`, 429 `quota_exceeded` naming
//! the flag), while a platform key still may; once the turns end, the key
//! gets in again. The turns come from 8 addresses (through a trusted
//! proxy, `X-Forwarded-For`), each within its share of the cap
//! (`--invocation-share-per-principal`, tests/e2e/fair_share.rs).

use serde_json::{Value, json};

use crate::support::hold::Hold;
use crate::support::{self, Server};

/// `--invocation-max-running-turns-per-app`'s default.
const DEFAULT_RUNNING: usize = 64;
/// One address's share of it by default.
const SHARE: usize = 8;

/// POST /sessions as `key`, from the `n`th visitor's address.
async fn post_from(server: &Server, key: &str, n: usize, body: Value) -> (u16, Value) {
    let response = (server.client.post(server.url("/sessions")))
        .bearer_auth(key)
        .header("x-forwarded-for", format!("192.0.2.{n}"))
        .json(&body)
        .send()
        .await
        .expect("POST");
    support::status_and_json(response).await
}

#[tokio::test]
async fn invocation_keys_meet_a_default_cap_on_an_apps_running_turns() {
    let dir = support::data_dir();
    let flags = [
        "--outbound-allow-private",
        "--trusted-proxy",
        "127.0.0.0/8,::1",
    ];
    let server = Server::start_with(dir.path(), &flags).await;
    let hold = Hold::start().await;
    hold.deploy_fetch(&server).await;
    let (_, key) = server.mint_key("invocation", "web", Some("fetch")).await;
    let create = |input| json!({"app": "fetch", "route": "/fetch", "input": input});
    // DEFAULT_RUNNING turns held on the upstream, started by the key from
    // DEFAULT_RUNNING / SHARE visitors' addresses.
    for i in 0..DEFAULT_RUNNING {
        let (status, body) = post_from(&server, &key, i / SHARE, create(hold.input())).await;
        assert_eq!(status, 201, "{body}");
    }
    hold.wait_arrived(DEFAULT_RUNNING).await;
    let visitor = DEFAULT_RUNNING / SHARE;
    let (status, refused) = post_from(&server, &key, visitor, create(hold.input())).await;
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
        let (s, _) = post_from(&server, &key, visitor, create(json!({"url": "x"}))).await;
        status = s;
        if s == 201 {
            break;
        }
        assert_eq!(s, 429);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, 201);
}
