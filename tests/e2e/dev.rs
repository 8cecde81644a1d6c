//! `agenthost dev DIR`: serve, deploy, and print a key and working curl
//! commands; the build's progress on lines of its own among the server's log;
//! on redb, and on an empty PostgreSQL database in the PostgreSQL pass; the
//! watch that redeploys an edited agent while sessions keep theirs.

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

/// `agenthost dev` of a copy of `examples/python/hello`: an edit of its
/// source is rebuilt and redeployed by the watch; the next session gets the
/// new version while a session started before keeps its own, on the same
/// server (its stream stays open across the redeploy).
#[tokio::test]
async fn dev_watches_the_sources_and_redeploys_while_sessions_keep_their_version() {
    let project = tempfile::tempdir().unwrap();
    for file in ["app.py", "agenthost.toml"] {
        std::fs::copy(
            support::workspace()
                .join("examples/python/hello")
                .join(file),
            project.path().join(file),
        )
        .unwrap();
    }
    let dir = support::data_dir();
    let cache = crate::support::agents::compile_cache();
    let mut child = Command::new(env!("CARGO_BIN_EXE_agenthost"))
        .arg("dev")
        .arg(project.path())
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--addr", "127.0.0.1:0", "--compile-cache-dir", &cache])
        .env_remove("AGENTHOST_BOOTSTRAP_KEY")
        .envs(crate::python::build_env())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let sink = log.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        while stderr.read_line(&mut line).is_ok_and(|n| n > 0) {
            sink.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
    let (lines, mut printed) = tokio::sync::mpsc::unbounded_channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    // Reads stdout up to a line that `done` accepts (a generous deadline:
    // a Python build and its compilation, never asserted as a timing).
    let mut text = String::new();
    let mut until = async |done: &dyn Fn(&str) -> bool, text: &mut String| -> String {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(600);
        loop {
            match tokio::time::timeout_at(deadline, printed.recv()).await {
                Ok(Some(line)) => {
                    text.push_str(&line);
                    text.push('\n');
                    if done(&line) {
                        return line;
                    }
                }
                other => panic!(
                    "dev stopped or went quiet ({other:?}):\n{text}\nstderr:\n{}",
                    log.lock().unwrap()
                ),
            }
        }
    };
    until(&|l| l.contains("Ctrl-C stops the server"), &mut text).await;
    let url = (text.lines())
        .find_map(|l| l.strip_prefix("agenthost listening on "))
        .expect("the address is printed")
        .to_string();
    let key = (text.lines())
        .find_map(|l| l.trim().strip_prefix("export AGENTHOST_API_KEY="))
        .expect("the key is printed")
        .to_string();
    assert!(text.contains(&format!("Console: {url}/")), "{text}");
    assert!(
        text.contains(&format!("AGENTHOST_URL={url} AGENTHOST_API_KEY={key} "))
            && text.contains(&format!("deploy {}", project.path().display())),
        "the redeploy command: {text}"
    );
    assert!(text.contains("Watching "), "{text}");

    // A session on v1, its stream kept open.
    let client = support::client();
    let start = async |input: &str| -> String {
        let response = (client.post(format!("{url}/sessions")))
            .bearer_auth(&key)
            .json(&json!({"app": "hello-py", "route": "/chat", "input": input}))
            .send()
            .await
            .unwrap();
        let (status, body) = support::status_and_json(response).await;
        assert_eq!(status, 201, "{body}");
        body["session_id"].as_str().unwrap().to_string()
    };
    let events = async |session: &str| {
        let response = (client.get(format!("{url}/sessions/{session}/events")))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        support::EventStream::new(response)
    };
    let before = start("one two").await;
    let mut before_stream = events(&before).await;
    let first = crate::support::agents::turn(&mut before_stream).await;
    assert_eq!(crate::support::agents::said(&first), ["You said: one two"]);

    // The edit: the watch rebuilds and redeploys.
    let source = project.path().join("app.py");
    let code = std::fs::read_to_string(&source).unwrap();
    assert!(code.contains("reply.write(\"You said:\")"));
    std::fs::write(&source, code.replace("You said:", "You wrote:")).unwrap();
    let redeployed = until(&|l| l.starts_with("Redeployed "), &mut text).await;
    assert!(
        redeployed.starts_with("Redeployed hello-py v2"),
        "{redeployed}\n{text}"
    );
    assert!(text.contains("app.py changed"), "{text}");

    // The next session runs v2; the one before keeps v1, on the same stream.
    let after = start("three").await;
    let mut after_stream = events(&after).await;
    let turn = crate::support::agents::turn(&mut after_stream).await;
    assert_eq!(crate::support::agents::said(&turn), ["You wrote: three"]);
    let response = (client.post(format!("{url}/sessions/{before}/input")))
        .bearer_auth(&key)
        .json(&json!({"input": "four"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let turn = crate::support::agents::turn(&mut before_stream).await;
    assert_eq!(crate::support::agents::said(&turn), ["You said: four"]);
    let _ = child.kill();
    let _ = child.wait();
}
