//! The first start mints a platform key named `bootstrap`, shows it once and saves it (0600),
//! on redb and, in the PostgreSQL pass, on an empty PostgreSQL database.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::support;

#[tokio::test]
async fn first_start_mints_a_platform_key_saved_with_mode_0600() {
    let dir = support::data_dir();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agenthost"));
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--addr", "127.0.0.1:0"]);
    // On the PostgreSQL pass, the first start on an empty database.
    let store = support::postgres_store(dir.path());
    if let Some(url) = &store {
        command
            .args(["--store", url])
            .env("AGENTHOST_MASTER_KEY", support::TEST_MASTER_KEY);
    }
    let mut child = command
        .env_remove("AGENTHOST_BOOTSTRAP_KEY")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (printed, url) = tokio::task::spawn_blocking(move || {
        let mut printed = None;
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if line.trim().starts_with("ahp_") {
                printed = Some(line.trim().to_string());
            }
            if let Some(url) = line.strip_prefix("agenthost listening on ") {
                return (printed, url.to_string());
            }
        }
        panic!("no listening line");
    })
    .await
    .unwrap();
    let key = printed.expect("the minted key is printed");
    let path = dir.path().join("bootstrap-key");
    assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), key);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let client = support::client();
    let engine = if store.is_some() { "postgres" } else { "redb" };
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
    let _ = child.wait();
}
