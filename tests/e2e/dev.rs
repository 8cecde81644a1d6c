//! `agenthost dev DIR`: serve, deploy, and print a key and working curl
//! commands; the build's progress on lines of its own among the server's log;
//! on redb, and on an empty PostgreSQL database in the PostgreSQL pass.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::json;

use crate::support;

#[tokio::test]
async fn dev_serves_deploys_and_prints_a_working_key_and_curl() {
    support::guest("hello"); // the example is built once into the shared guest target dir
    let dir = support::data_dir();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agenthost"));
    command
        .arg("dev")
        .arg(support::workspace().join("examples/hello"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--addr", "127.0.0.1:0"]);
    // On the PostgreSQL pass, dev on an empty PostgreSQL database.
    let store = support::postgres_store(dir.path());
    if let Some(url) = &store {
        command
            .args(["--store", url])
            .env("AGENTHOST_MASTER_KEY", support::TEST_MASTER_KEY);
    }
    let mut child = command
        .env_remove("AGENTHOST_BOOTSTRAP_KEY")
        .env(
            "CARGO_TARGET_DIR",
            support::workspace().join("target/guests"),
        )
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The server's log and the build's progress, as they come.
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let mut stderr = child.stderr.take().unwrap();
    let sink = log.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = std::io::Read::read(&mut stderr, &mut buf) {
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let stdout = child.stdout.take().unwrap();
    let printed = tokio::task::spawn_blocking(move || {
        let mut text = String::new();
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref() {
            let line = line.unwrap();
            text.push_str(&line);
            text.push('\n');
            if line.contains("Ctrl-C stops the server") {
                std::thread::spawn(move || for _ in lines {});
                return text;
            }
        }
        panic!("dev exited early:\n{text}");
    })
    .await
    .unwrap();
    let key = printed
        .lines()
        .find_map(|l| l.trim().strip_prefix("export AGENTHOST_API_KEY="))
        .expect("the key is printed")
        .to_string();
    let url = printed
        .lines()
        .find_map(|l| l.strip_prefix("agenthost listening on "))
        .expect("the address is printed")
        .to_string();
    assert!(
        printed.contains(&format!("curl -N {url}/sessions/$SID/events")),
        "{printed}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("bootstrap-key"))
            .unwrap()
            .trim(),
        key
    );

    // The printed curl does what it says.
    let client = support::client();
    let engine = if store.is_some() { "postgres" } else { "redb" };
    support::assert_engine(&client, &url, &key, engine).await;
    let response = client
        .post(format!("{url}/sessions"))
        .bearer_auth(&key)
        .json(&json!({"app": "hello", "route": "/chat", "input": "hello agent host"}))
        .send()
        .await
        .unwrap();
    let (status, body) = support::status_and_json(response).await;
    assert_eq!(status, 201, "{body}");
    let session = body["session_id"].as_str().unwrap();
    let response = client
        .get(format!("{url}/sessions/{session}/events"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let events = support::EventStream::new(response)
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED");
    let _ = child.kill();
    let _ = child.wait();

    // The progress was written before the curl commands: on a line of its
    // own, never rewritten in place over the log, and no colour codes in a
    // log that is not a terminal.
    let log = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    assert!(log.lines().any(|l| l == "building hello v1 ..."), "{log}");
    assert!(!log.contains('\r'), "{log:?}");
    assert!(!log.contains('\u{1b}'), "{log:?}");
    assert!(log.contains(" INFO "), "the server logged at info: {log}");
    // The key is printed on stdout for the developer, never logged.
    support::leaks::used("platform key", &key);
    if let Some(leak) = support::leaks::find(log.as_bytes()) {
        panic!("{leak}");
    }
}
