//! The deploy path: the CLI, the manifest, and one broken bundle per build check.

use std::process::Command;

use serde_json::json;

use crate::support::{self, KEY, Server, bundle};

const MANIFEST: &str = "[app]\nslug = \"broken\"\n[agent]\nentry = \"agent.wasm\"\n";

#[tokio::test]
async fn deploy_command_builds_packages_and_waits_until_active() {
    support::guest("hello"); // builds the example once into the shared guest target dir
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let output = Command::new(env!("CARGO_BIN_EXE_agenthost"))
        .arg("deploy")
        .arg(support::workspace().join("examples/hello"))
        .env("AGENTHOST_URL", &server.url)
        .env("AGENTHOST_API_KEY", KEY)
        .env(
            "CARGO_TARGET_DIR",
            support::workspace().join("target/guests"),
        )
        .output()
        .expect("run agenthost deploy");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "deploy failed: {stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("deployed hello v1"), "{stdout}");

    let (status, app) = server.get("/apps/hello").await;
    assert_eq!(status, 200, "{app}");
    assert_eq!(app["routes"], json!(["/chat"]));
    assert_eq!(app["current_deployment"]["version"], 1);
    let (_, rows) = server.get("/apps/hello/deployments").await;
    assert_eq!(rows[0]["status"], "active");
    assert_eq!(rows[0]["active"], true);
    let (status, apps) = server.get("/apps").await;
    assert_eq!(status, 200);
    assert_eq!(apps.as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn deploy_command_exits_non_zero_with_the_build_error() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("agenthost.toml"), MANIFEST).unwrap();
    std::fs::write(project.path().join("agent.wasm"), b"\0asm\x01\0\0\0").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_agenthost"))
        .args(["deploy", "--no-build"])
        .arg(project.path())
        .env("AGENTHOST_URL", &server.url)
        .env("AGENTHOST_API_KEY", KEY)
        .output()
        .expect("run agenthost deploy");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "a failed build: {stderr}");
    assert!(
        stderr.contains("failed") && stderr.contains("not a component"),
        "{stderr}"
    );
}

/// A project of `component` under the manifest `MANIFEST` names (slug `broken`).
fn project(component: &[u8]) -> tempfile::TempDir {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("agenthost.toml"), MANIFEST).unwrap();
    std::fs::write(project.path().join("agent.wasm"), component).unwrap();
    project
}

/// Runs `agenthost deploy --no-build` of `project` against `url` with `key`.
async fn deploy_to(
    project: &std::path::Path,
    url: &str,
    key: &str,
    extra: &[&str],
) -> (Option<i32>, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_agenthost"))
        .args(["deploy", "--no-build"])
        .args(extra)
        .arg(project)
        .env("AGENTHOST_URL", url)
        .env("AGENTHOST_API_KEY", key)
        .output()
        .await
        .expect("run agenthost deploy");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), text)
}

#[tokio::test]
async fn deploy_exits_5_when_the_server_refuses_the_upload() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let project = project(b"\0asm\x01\0\0\0");
    let (code, output) = deploy_to(project.path(), &server.url, "not-a-key", &[]).await;
    assert_eq!(code, Some(5), "{output}");
    assert!(
        output.contains("401") && output.contains("invalid API key"),
        "{output}"
    );
}

#[tokio::test]
async fn a_wrong_key_is_refused_every_time_even_with_a_large_upload() {
    // The server refuses a bad key before it reads the body and closes the
    // connection: sent at once, an 18 MB upload mostly failed as "the
    // connection failed" (exit 6). The key is checked first.
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let mut noise = Vec::with_capacity(18 << 20);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while noise.len() < 18 << 20 {
        // xorshift: bytes gzip cannot shrink, so the upload stays large.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.extend_from_slice(&x.to_le_bytes());
    }
    let project = project(&noise);
    for attempt in 1..=5 {
        let (code, output) = deploy_to(project.path(), &server.url, "not-a-key", &[]).await;
        assert_eq!(code, Some(5), "attempt {attempt}: {output}");
        assert!(
            output.contains("refused (401)") && output.contains("invalid API key"),
            "attempt {attempt}: {output}"
        );
    }
    // An invocation key is refused as well (403), before any upload.
    server.deploy("broken", &support::guest("hello")).await;
    let (_, invocation) = server
        .mint_key("invocation", "frontend", Some("broken"))
        .await;
    let (code, output) = deploy_to(project.path(), &server.url, &invocation, &[]).await;
    assert_eq!(code, Some(5), "{output}");
    assert!(output.contains("refused (403)"), "{output}");
}

#[tokio::test]
async fn deploy_exits_6_when_the_server_cannot_be_reached() {
    // A port nobody listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let project = project(b"\0asm\x01\0\0\0");
    let url = format!("http://127.0.0.1:{port}");
    // A typo in --url fails at once, naming the fix, whatever the timeout
    // (it once retried for the whole 10 minutes, like a hang).
    let (code, output) = deploy_to(project.path(), &url, KEY, &["--timeout-secs", "600"]).await;
    assert_eq!(code, Some(6), "{output}");
    assert!(
        output.contains("nothing listens") && output.contains("--wait-for-server"),
        "{output}"
    );
    assert!(!output.contains("retrying"), "{output}");
    // Asked to wait (a server still starting), it retries until the timeout.
    let flags = ["--timeout-secs", "2", "--wait-for-server"];
    let (code, output) = deploy_to(project.path(), &url, KEY, &flags).await;
    assert_eq!(code, Some(6), "{output}");
    assert!(output.contains("cannot reach the server"), "{output}");
    assert!(
        output.contains("retrying"),
        "retried until the timeout: {output}"
    );
}

#[tokio::test]
async fn deploy_exits_4_when_the_upload_gets_no_answer_within_the_timeout() {
    // Accepts connections and never answers: only the timeout ends the upload.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let project = project(b"\0asm\x01\0\0\0");
    let (code, output) = deploy_to(project.path(), &url, KEY, &["--timeout-secs", "1"]).await;
    assert_eq!(code, Some(4), "{output}");
    assert!(output.contains("no answer before the deadline"), "{output}");
}

#[tokio::test]
async fn deploy_retries_a_refused_poll_and_still_waits_for_the_build() {
    // One request a second per key. Once the upload is in, the test keeps
    // the deploy key's bucket empty until the server has refused a request
    // that is not the test's own: the deploy's poll. No window decides it.
    let dir = support::data_dir();
    let flags = ["--rate-limit", "1", "--rate-limit-burst", "1"];
    let server = Server::start_with(dir.path(), &flags).await;
    let (_, watcher) = server.mint_key("platform", "watcher", None).await;
    let project = project(&support::guest("hello"));
    let deploy = deploy_to(project.path(), &server.url, KEY, &[]);
    tokio::pin!(deploy);
    let hammer = async {
        let mut ours = 0.0;
        loop {
            let (status, apps) = server.get_as(&watcher, "/apps").await;
            ours += f64::from(status == 429);
            if apps.to_string().contains("\"broken\"") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        loop {
            let (status, _) = server.get("/apps").await;
            ours += f64::from(status == 429);
            let response = (server.client.get(server.url("/metrics")))
                .bearer_auth(&watcher)
                .send()
                .await
                .expect("GET /metrics");
            let text = response.text().await.expect("the metrics");
            let refused = (text.lines())
                .find_map(|l| l.strip_prefix("agenthost_rate_limited_total "))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0);
            if refused > ours {
                return;
            }
        }
    };
    let (code, output) = tokio::select! {
        out = &mut deploy => out,
        () = hammer => deploy.await,
    };
    assert_eq!(code, Some(0), "{output}");
    assert!(
        output.contains("429") && output.contains("retrying"),
        "{output}"
    );
    assert!(output.contains("deployed broken v1"), "{output}");
}

/// Uploads `files` and returns the resolved row's status and error.
async fn build(server: &Server, files: &[(&str, &[u8])]) -> (String, String) {
    let (status, row) = server.upload(bundle(files), MANIFEST).await;
    assert_eq!(status, 202, "{row}");
    assert_eq!(row["status"], "building");
    assert_eq!(row["active"], false);
    let row = server.wait_built(&row).await;
    (
        row["status"].as_str().unwrap().to_string(),
        row["error"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn each_build_check_fails_with_its_own_message() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let unknown_import = wat::parse_str(
        "(component (import \"acme:nope/thing\" (instance (export \"poke\" (func)))))",
    )
    .unwrap();
    let no_world = wat::parse_str("(component)").unwrap();
    let core = wat::parse_str("(module)").unwrap();
    // More than one instance's share of the pool (docs/limits.md): three
    // memories, and 25 core instances.
    let instances = |module: &str, n: usize| {
        let each = "(core instance (instantiate $m))".repeat(n);
        wat::parse_str(format!("(component (core module $m {module}) {each})")).unwrap()
    };
    let memories = instances("(memory 1)", 3);
    let core_instances = instances("", 25);
    type Case<'a> = (&'a str, Vec<(&'a str, Vec<u8>)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "entry missing",
            vec![("other.wasm", no_world.clone())],
            "missing from the bundle",
        ),
        ("core module", vec![("agent.wasm", core)], "wasm32-wasip2"),
        (
            "not wasm",
            vec![("agent.wasm", b"definitely not wasm".to_vec())],
            "cannot be compiled",
        ),
        (
            "three memories",
            vec![("agent.wasm", memories)],
            "3 Wasm linear memories, which exceeds the configured maximum of 2",
        ),
        (
            "25 core instances",
            vec![("agent.wasm", core_instances)],
            "25 core module instances, which exceeds the configured maximum of 24",
        ),
        (
            "unknown import",
            vec![("agent.wasm", unknown_import)],
            "acme:nope/thing",
        ),
        (
            "wrong world",
            vec![("agent.wasm", no_world)],
            "expected export `agenthost:agent/guest@0.1.0`",
        ),
        (
            "describe traps",
            vec![("agent.wasm", support::guest("describe-trap"))],
            "describe-trap: boom",
        ),
        (
            "describe loops",
            vec![("agent.wasm", support::guest("describe-loop"))],
            "did not return within",
        ),
        (
            "invalid description",
            vec![("agent.wasm", support::guest("describe-invalid"))],
            "route `chat` must start with `/`",
        ),
    ];
    for (name, files, needle) in cases {
        let files: Vec<(&str, &[u8])> = files.iter().map(|(p, b)| (*p, b.as_slice())).collect();
        let (status, error) = build(&server, &files).await;
        assert_eq!(status, "failed", "{name}");
        assert!(error.contains(needle), "{name}: {error:?} lacks {needle:?}");
    }
}

#[tokio::test]
async fn unsafe_bundles_fail_the_build() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Symlink);
    header.set_size(0);
    tar.append_link(&mut header, "agent.wasm", "/etc/passwd")
        .unwrap();
    let (status, row) = server.upload(tar.into_inner().unwrap(), MANIFEST).await;
    assert_eq!(status, 202);
    let row = server.wait_built(&row).await;
    assert_eq!(row["status"], "failed");
    assert!(row["error"].as_str().unwrap().contains("link"), "{row}");

    let (status, row) = server
        .upload(b"not a tar file at all, just text".repeat(20), MANIFEST)
        .await;
    assert_eq!(status, 202);
    let row = server.wait_built(&row).await;
    assert_eq!(row["status"], "failed", "{row}");
}

#[tokio::test]
async fn bad_manifests_and_bodies_are_refused_before_any_build() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let tarball = || bundle(&[("agent.wasm", b"x")]);
    for (manifest, needle) in [
        ("this is [not toml", "TOML"),
        ("[app]\nslug = \"a\"\n", "agent"),
        (
            "[app]\nslug = \"a\"\n[agent]\nentry = \"\"\n",
            "agent.entry",
        ),
        (
            "[app]\nslug = \"a\"\nflavour = \"x\"\n[agent]\nentry = \"a.wasm\"\n",
            "flavour",
        ),
    ] {
        let (status, body) = server.upload(tarball(), manifest).await;
        assert_eq!(status, 422, "{manifest}: {body}");
        assert_eq!(body["error"]["code"], "invalid_manifest");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(needle),
            "{body}"
        );
    }

    // A pinned version that exists is 422; the versions stay 1, 2, ...
    let pinned = "[app]\nslug = \"pin\"\nversion = 1\n[agent]\nentry = \"agent.wasm\"\n";
    let (status, first) = server.upload(tarball(), pinned).await;
    assert_eq!((status, first["version"].as_u64()), (202, Some(1)));
    let (status, body) = server.upload(tarball(), pinned).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already exists")
    );
    let (status, next) = server
        .upload(
            tarball(),
            "[app]\nslug = \"pin\"\n[agent]\nentry = \"agent.wasm\"\n",
        )
        .await;
    assert_eq!((status, next["version"].as_u64()), (202, Some(2)));

    // Unreadable multipart: 400, JSON.
    let response = server
        .client
        .post(server.url("/deployments"))
        .bearer_auth(KEY)
        .header("content-type", "multipart/form-data; boundary=xyz")
        .body("garbage")
        .send()
        .await
        .unwrap();
    let (status, body) = support::status_and_json(response).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_multipart")),
        "{body}"
    );
    // Not multipart at all: the same JSON error.
    let response = server
        .client
        .post(server.url("/deployments"))
        .bearer_auth(KEY)
        .json(&serde_json::json!({"tarball": "x"}))
        .send()
        .await
        .unwrap();
    let (status, body) = support::status_and_json(response).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_multipart")),
        "{body}"
    );
    // A part missing: 400.
    let form = reqwest::multipart::Form::new().text("manifest", MANIFEST);
    let response = server
        .client
        .post(server.url("/deployments"))
        .bearer_auth(KEY)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let (status, body) = support::status_and_json(response).await;
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tarball")
    );
}

#[tokio::test]
async fn concurrent_deploys_get_distinct_versions() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let manifest = "[app]\nslug = \"race\"\n[agent]\nentry = \"agent.wasm\"\n";
    let uploads = (0..6).map(|_| server.upload(bundle(&[("agent.wasm", b"x")]), manifest));
    let mut versions: Vec<u64> = futures::future::join_all(uploads)
        .await
        .into_iter()
        .map(|(status, row)| {
            assert_eq!(status, 202, "{row}");
            row["version"].as_u64().unwrap()
        })
        .collect();
    versions.sort();
    assert_eq!(versions, vec![1, 2, 3, 4, 5, 6]);
}

#[tokio::test]
async fn a_build_cut_by_a_crash_runs_again_at_restart() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    // describe loops until its CPU budget runs out: the build takes a while.
    let looping = support::guest("describe-loop");
    let (status, row) = server
        .upload(bundle(&[("agent.wasm", &looping)]), MANIFEST)
        .await;
    assert_eq!(status, 202);
    server.kill();
    let server = Server::start(dir.path()).await;
    let row = server.wait_built(&row).await;
    assert_eq!(row["status"], "failed", "{row}");
    assert!(
        row["error"].as_str().unwrap().contains("describe failed"),
        "{row}"
    );
}
