//! Keys and ids: the first start mints a platform key named `bootstrap`,
//! saves it (0600) and prints it nowhere, in a data dir made 0700 (on redb and, in the
//! PostgreSQL pass, on an empty PostgreSQL database); a short bootstrap key
//! is refused; stream tokens die with a bootstrap key rotated under the same
//! id; failed authentication is throttled per address; a busy port fails
//! before the data dir is touched; session ids carry all their random bits.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::json;

use crate::support::{self, KEY, Server};

/// `agenthost serve` on `data_dir` with `bootstrap` as its bootstrap key
/// (none: unset); returns the child and the lines it printed up to its
/// listening line, and its URL, or the child that exited before.
async fn serve(data_dir: &Path, bootstrap: Option<&str>) -> (Child, Vec<String>, Option<String>) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agenthost"));
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--addr", "127.0.0.1:0"]);
    // On the PostgreSQL pass, the database of this data dir.
    if let Some(url) = support::postgres_store(data_dir) {
        command
            .args(["--store", &url])
            .env("AGENTHOST_MASTER_KEY", support::TEST_MASTER_KEY);
    }
    match bootstrap {
        Some(key) => command.env("AGENTHOST_BOOTSTRAP_KEY", key),
        None => command.env_remove("AGENTHOST_BOOTSTRAP_KEY"),
    };
    // The log at info: a key must never be logged (the first-start test
    // scans it).
    let mut child = command
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (printed, url) = tokio::task::spawn_blocking(move || {
        let mut printed = Vec::new();
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref() {
            let line = line.unwrap();
            if let Some(url) = line.strip_prefix("agenthost listening on ") {
                let url = url.trim().to_string();
                std::thread::spawn(move || for _ in lines {});
                return (printed, Some(url));
            }
            printed.push(line);
        }
        (printed, None)
    })
    .await
    .unwrap();
    (child, printed, url)
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test]
async fn first_start_mints_a_platform_key_saved_0600_printed_nowhere_in_a_0700_data_dir() {
    let parent = support::data_dir();
    // A data dir the server makes itself (the temp dir is made 0700 by the test).
    let dir = parent.path().join("data");
    let (mut child, printed, url) = serve(&dir, None).await;
    let url = url.expect("the server listens");
    let path = dir.join("bootstrap-key");
    let key = std::fs::read_to_string(&path).unwrap().trim().to_string();
    assert!(key.starts_with("ahp_"), "{key}");
    let stdout = printed.join("\n");
    assert!(!stdout.contains(&key), "the key was printed: {stdout}");
    assert!(
        stdout.contains(&path.display().to_string()),
        "says where the key is: {stdout}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "the data dir is private");
    }
    let client = support::client();
    let engine = if support::on_postgres() {
        "postgres"
    } else {
        "redb"
    };
    support::assert_engine(&client, &url, &key, engine).await;
    let ok = client
        .get(format!("{url}/apps"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    // Named as its file and as `agenthost dev`'s key: `bootstrap` (the
    // approver its decisions name).
    let (status, list) = support::status_and_json(
        client
            .get(format!("{url}/api-keys"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{list}");
    let names: Vec<&str> = (list.as_array().unwrap().iter())
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bootstrap"], "{list}");
    let bad = client
        .get(format!("{url}/apps"))
        .bearer_auth(format!("{key}0"))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 401);
    let _ = child.kill();
    let mut log = Vec::new();
    child.stderr.take().unwrap().read_to_end(&mut log).unwrap();
    let _ = child.wait();
    support::leaks::used("platform key", &key);
    assert_eq!(
        support::leaks::find(&log),
        None,
        "the key in the server's log"
    );
}

#[tokio::test]
async fn a_short_bootstrap_key_is_refused_with_a_clear_error() {
    let dir = support::data_dir();
    let (mut child, _, url) = serve(dir.path(), Some("short-key")).await;
    assert!(url.is_none(), "the server started with a 9-character key");
    let status = child.wait().unwrap();
    assert!(!status.success());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains("AGENTHOST_BOOTSTRAP_KEY is 9 characters long: use at least 16"),
        "{stderr}"
    );
}

#[tokio::test]
async fn stream_tokens_die_with_a_bootstrap_key_rotated_under_the_same_id() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("hello", &support::guest("hello")).await;
    let session = server.session("hello", "/chat", json!("hi")).await;
    let (status, minted) = server
        .post(&format!("/sessions/{session}/stream-token"), json!({}))
        .await;
    assert_eq!(status, 201, "{minted}");
    let token = minted["stream_token"].as_str().unwrap().to_string();
    let stream = format!("/sessions/{session}/events?token={token}");
    let response = server.client.get(server.url(&stream)).send().await.unwrap();
    assert_eq!(response.status(), 200, "the token works");
    drop(response);
    drop(server);

    // The operator rotates the bootstrap key: a new value, the same id.
    let rotated = "a-rotated-bootstrap-key-0123456789";
    let (child, _, url) = serve(dir.path(), Some(rotated)).await;
    let url = url.expect("the server listens");
    let client = support::client();
    let get = |path: String, key: Option<&str>| {
        let mut request = client.get(format!("{url}{path}"));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        request.send()
    };
    let old = get("/apps".into(), Some(KEY)).await.unwrap();
    assert_eq!(old.status(), 401, "the old bootstrap key is gone");
    let new = get("/apps".into(), Some(rotated)).await.unwrap();
    assert_eq!(new.status(), 200);
    let refused = get(stream, None).await.unwrap();
    assert_eq!(
        refused.status(),
        401,
        "a token of the old bootstrap key still opens a stream"
    );
    stop(child);
}

#[tokio::test]
async fn failed_authentication_is_throttled_per_address() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--auth-failures-per-minute", "3"]).await;
    for _ in 0..3 {
        let (status, body) = server.get_as("not-a-key", "/apps").await;
        assert_eq!(status, 401, "{body}");
    }
    let response = (server.client.get(server.url("/apps")))
        .bearer_auth("still-not-a-key")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    let retry_after = (response.headers().get("retry-after"))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .expect("a Retry-After of whole seconds");
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_auth_failures", "{body}");
    // The address is held off until its minute is over, except with a
    // valid API key (checked in memory before the block).
    let (status, body) = server.get_as(KEY, "/apps").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.get_as("still-not-a-key", "/apps").await;
    assert_eq!(status, 429, "{body}");
    // Public endpoints are not checked.
    let (status, _) = server.get("/healthz").await;
    assert_eq!(status, 200);
}

/// `serve` on a port that is taken fails before it writes anything: the
/// data dir is not even made (it once held a fresh master key and
/// bootstrap key after the failure).
#[tokio::test]
async fn a_busy_port_fails_before_the_data_dir_is_touched() {
    let parent = support::data_dir();
    let dir = parent.path().join("data");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_agenthost"))
            .arg("serve")
            .arg("--data-dir")
            .arg(&dir)
            .args(["--addr", &addr])
            .env_remove("AGENTHOST_BOOTSTRAP_KEY")
            .env_remove("AGENTHOST_MASTER_KEY")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    drop(taken);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("cannot listen on"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(parent.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert!(
        left.is_empty(),
        "written before the port was checked: {left:?}"
    );
}

/// The review's N9: a client retrying with its expired (or revoked) token
/// guesses nothing, and its address is not throttled for it; a valid
/// end-user token and the platform key from that address still work.
#[tokio::test]
async fn genuine_tokens_refused_for_their_age_never_trip_the_throttle() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--auth-failures-per-minute", "3"]).await;
    let manifest = "[app]\nslug = \"shop\"\n[agent]\nentry = \"agent.wasm\"\n[end_users]\n";
    crate::end_user_revocation::deploy_shop(&server, manifest).await;
    let expired = (server.end_user_token_with("shop", json!({"user": "ada", "ttl_secs": 1}))).await;
    let revoked = server.end_user_token("shop", "bob").await;
    let (status, body) = (server.post("/apps/shop/end-users/bob/revoke", json!({}))).await;
    assert_eq!(status, 200, "{body}");
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    for (token, code) in [(&expired, "token_expired"), (&revoked, "token_revoked")] {
        for _ in 0..5 {
            let (status, body) = crate::end_user_revocation::try_create(&server, token).await;
            assert_eq!(
                (status, &body["error"]["code"]),
                (401, &json!(code)),
                "{body}"
            );
        }
    }
    let valid = server.end_user_token("shop", "cy").await;
    let (status, body) = crate::end_user_revocation::try_create(&server, &valid).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = server.get_as(KEY, "/apps").await;
    assert_eq!(status, 200, "{body}");
    // A forged token is a guess: it counts.
    let (claims, _) = valid.rsplit_once('.').unwrap();
    let forged = format!("{claims}.{}", "A".repeat(43));
    for _ in 0..3 {
        let (status, _) = crate::end_user_revocation::try_create(&server, &forged).await;
        assert_eq!(status, 401);
    }
    let (status, body) = crate::end_user_revocation::try_create(&server, &forged).await;
    assert_eq!(status, 429, "{body}");
}

#[tokio::test]
async fn session_ids_carry_all_their_random_bits() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("hello", &support::guest("hello")).await;
    // Sessions made in one burst share milliseconds; uuid's own v7 ids
    // would then differ only by a counter in their first 42 random bits.
    let mut same_millisecond = 0;
    for _ in 0..10 {
        let creates = (0..32).map(|_| {
            server.post(
                "/sessions",
                json!({"app": "hello", "route": "/chat", "input": "hi"}),
            )
        });
        let mut ids: Vec<u128> = futures::future::join_all(creates)
            .await
            .into_iter()
            .map(|(status, body)| {
                assert_eq!(status, 201, "{body}");
                let id = body["session_id"].as_str().unwrap();
                uuid::Uuid::parse_str(id).unwrap().as_u128()
            })
            .collect();
        ids.sort_unstable();
        for pair in ids.windows(2) {
            let millis = |id: u128| id >> 80;
            if millis(pair[0]) != millis(pair[1]) {
                continue;
            }
            same_millisecond += 1;
            // rand_a (12 bits) and the top 30 of rand_b: the 42 counter bits.
            let counter = |id: u128| ((id >> 64) & 0xfff) << 30 | ((id >> 32) & 0x3fff_ffff);
            let gap = counter(pair[1]) - counter(pair[0]);
            assert!(
                gap > 1 << 20,
                "two session ids of one millisecond are {gap} apart in their first random bits: {:032x} {:032x}",
                pair[0],
                pair[1]
            );
        }
        if same_millisecond >= 5 {
            break;
        }
    }
    // Whether any two sessions shared a millisecond depends on the
    // machine's speed (a slow day's PostgreSQL had none): the generator is
    // tested with its millisecond held (`util::random_v7_at`'s unit test);
    // here, every pair that did share one was checked above.
}
