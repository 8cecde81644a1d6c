//! Test support: guest components built once, the real `agenthost` binary on
//! 127.0.0.1 with a temp data dir, an HTTP client and an SSE reader.

#![allow(dead_code)]

pub mod agents;
pub mod browser;
pub mod fake_openai;
pub mod hold;
pub mod idp;
pub mod leaks;
#[path = "../../support/pg_cluster.rs"]
pub mod pg_cluster;
mod sse;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use agenthost::{CreatedSession, DeploymentStatus, DeploymentView, MintedKey};
use serde_json::{Value, json};

pub use sse::{EventStream, Frame, Read, types};

pub const KEY: &str = "test-bootstrap-key";

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn guest_target_dir() -> PathBuf {
    workspace().join("target").join("guests")
}

/// Builds the test fixtures and the hello example once per test process.
/// Guests use their own target dir: building into this cargo's would deadlock.
pub fn guest(name: &str) -> Vec<u8> {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        // A fresh machine may lack the target; rustup makes this a no-op otherwise.
        let _ = Command::new("rustup")
            .args(["target", "add", "wasm32-wasip2"])
            .status();
        for manifest in [
            "tests/fixtures/Cargo.toml",
            "examples/hello/Cargo.toml",
            "examples/ops/Cargo.toml",
            "examples/assistant/Cargo.toml",
            "examples/bench/Cargo.toml",
        ] {
            let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .args(["build", "--release", "--target", "wasm32-wasip2", "--quiet"])
                .arg("--manifest-path")
                .arg(workspace().join(manifest))
                .arg("--target-dir")
                .arg(guest_target_dir())
                .status()
                .expect("run cargo for the guests");
            assert!(status.success(), "building {manifest} failed");
        }
    });
    let path = guest_target_dir()
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", name.replace('-', "_")));
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The master key every host of a PostgreSQL test shares.
pub const TEST_MASTER_KEY: &str =
    "5ecc0de5ecc0de5ecc0de5ecc0de5ecc0de5ecc0de5ecc0de5ecc0de5ecc0de5";

/// Whether the e2e suite runs on PostgreSQL (`AGENTHOST_TEST_STORE=postgres`)
/// rather than the embedded redb.
pub fn on_postgres() -> bool {
    std::env::var("AGENTHOST_TEST_STORE").is_ok_and(|s| s == "postgres")
}

/// On PostgreSQL: the URL of the database of this data dir (one per test
/// server, the same across its restarts).
pub fn postgres_store(data_dir: &Path) -> Option<String> {
    if !on_postgres() {
        return None;
    }
    let name = data_dir.file_name()?.to_string_lossy().to_lowercase();
    let name: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let name = format!("t_{name}");
    Some(make_database(name))
}

/// The URL of the test cluster's database `name`, made on first use. A
/// failure (initdb, the cluster, a connection) fails the test: it must
/// never run on redb instead.
fn make_database(name: String) -> String {
    // The sync client cannot run on the test's async runtime thread.
    match std::thread::spawn(move || pg_cluster::database(&name)).join() {
        Ok(url) => url,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Everything the store of `data_dir` holds, as bytes: the redb file, or
/// on PostgreSQL every row of every table of the store's schema (found in
/// the catalog, so a new table is read too): `bytea` columns as their raw
/// bytes, the others as text.
pub fn stored_bytes(data_dir: &Path) -> Vec<u8> {
    let Some(url) = postgres_store(data_dir) else {
        return std::fs::read(data_dir.join("agenthost.redb")).expect("read the redb file");
    };
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
        let columns = client
            .query(
                "SELECT c.table_name::text, c.column_name::text, c.data_type::text
                 FROM information_schema.columns c
                 JOIN information_schema.tables t
                   ON t.table_schema = c.table_schema AND t.table_name = c.table_name
                 WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
                 ORDER BY c.table_name, c.ordinal_position",
                &[],
            )
            .expect("read the catalog");
        let mut tables: Vec<(String, Vec<(String, bool)>)> = Vec::new();
        for row in columns {
            let (table, column, kind): (String, String, String) =
                (row.get(0), row.get(1), row.get(2));
            if tables.last().is_none_or(|(t, _)| *t != table) {
                tables.push((table, Vec::new()));
            }
            let (_, cols) = tables.last_mut().expect("a table");
            cols.push((column, kind == "bytea"));
        }
        assert!(
            tables.iter().any(|(t, _)| t == "events"),
            "the store's tables are not in the current schema: {tables:?}"
        );
        let mut out = Vec::new();
        for (table, cols) in &tables {
            let list: Vec<String> = (cols.iter())
                .map(|(c, raw)| {
                    if *raw {
                        format!("\"{c}\"")
                    } else {
                        format!("\"{c}\"::text")
                    }
                })
                .collect();
            let sql = format!("SELECT {} FROM \"{table}\"", list.join(", "));
            for row in client.query(&sql, &[]).expect("read a table") {
                for (i, (_, raw)) in cols.iter().enumerate() {
                    if *raw {
                        let bytes: Option<Vec<u8>> = row.get(i);
                        out.extend(bytes.unwrap_or_default());
                    } else {
                        let text: Option<String> = row.get(i);
                        out.extend(text.unwrap_or_default().into_bytes());
                    }
                    out.push(b'\n');
                }
            }
        }
        out
    })
    .join()
    .expect("read the database")
}

/// The real server, killed on drop. Its log (stderr, at `info` unless the
/// test says otherwise) goes to a file, scanned on drop for every key, token
/// and secret value the tests used (`leaks`).
pub struct Server {
    child: Child,
    pub url: String,
    pub data_dir: PathBuf,
    pub client: reqwest::Client,
    log: Log,
    /// Copies the server's stderr into the log file until the server exits
    /// (a pipe, so the server's own writes never meet the file's limits).
    drain: Option<std::thread::JoinHandle<()>>,
}

/// Where a server's log is: a temp file of its own (removed with it), or
/// the test's file.
enum Log {
    Temp(tempfile::TempPath),
    At(PathBuf),
}

impl Log {
    fn path(&self) -> &Path {
        match self {
            Log::Temp(path) => path,
            Log::At(path) => path,
        }
    }
}

impl Server {
    pub async fn start(data_dir: &Path) -> Server {
        Server::start_with(data_dir, &[]).await
    }

    /// Starts the server with extra `serve` flags.
    pub async fn start_with(data_dir: &Path, flags: &[&str]) -> Server {
        Server::start_at(data_dir, "127.0.0.1:0", flags).await
    }

    /// Starts the server on `addr` (e.g. the address of a server it replaces).
    pub async fn start_at(data_dir: &Path, addr: &str, flags: &[&str]) -> Server {
        Server::launch(data_dir, addr, postgres_store(data_dir), flags, &[]).await
    }

    /// Starts the server with extra environment variables (test hooks).
    pub async fn start_with_env(data_dir: &Path, env: &[(&str, &str)]) -> Server {
        Server::launch(data_dir, "127.0.0.1:0", postgres_store(data_dir), &[], env).await
    }

    /// Starts one host of several sharing the PostgreSQL database `database`
    /// (made on first use), each with its own data dir.
    pub async fn start_host(data_dir: &Path, database: &str) -> Server {
        Server::start_host_with(data_dir, database, &[]).await
    }

    /// `start_host` with extra `serve` flags.
    pub async fn start_host_with(data_dir: &Path, database: &str, flags: &[&str]) -> Server {
        let url = make_database(database.to_string());
        Server::launch(data_dir, "127.0.0.1:0", Some(url), flags, &[]).await
    }

    /// Starts a host on the PostgreSQL database at `url`, with extra
    /// `serve` flags.
    pub async fn start_on_with(data_dir: &Path, url: &str, flags: &[&str]) -> Server {
        Server::launch(data_dir, "127.0.0.1:0", Some(url.to_string()), flags, &[]).await
    }

    /// Starts the server with extra environment variables, its stderr (the
    /// log) written to `log` instead of the test's own.
    pub async fn start_logging_to(data_dir: &Path, log: &Path, env: &[(&str, &str)]) -> Server {
        let file = std::fs::File::create(log).expect("create the log file");
        let store = postgres_store(data_dir);
        let log = (file, Log::At(log.to_path_buf()));
        Server::launch_with(data_dir, "127.0.0.1:0", store, &[], env, log).await
    }

    async fn launch(
        data_dir: &Path,
        addr: &str,
        store: Option<String>,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let (file, path) = tempfile::NamedTempFile::new()
            .expect("a log file")
            .into_parts();
        let log = (file, Log::Temp(path));
        Server::launch_with(data_dir, addr, store, flags, env, log).await
    }

    async fn launch_with(
        data_dir: &Path,
        addr: &str,
        store: Option<String>,
        flags: &[&str],
        env: &[(&str, &str)],
        (stderr, log): (std::fs::File, Log),
    ) -> Server {
        leaks::used("bootstrap key", KEY);
        leaks::used("master key", TEST_MASTER_KEY);
        // On the PostgreSQL pass every server must be on PostgreSQL, even
        // one whose caller forgot to ask for it.
        let engine = if store.is_some() || on_postgres() {
            "postgres"
        } else {
            "redb"
        };
        let mut command = Command::new(env!("CARGO_BIN_EXE_agenthost"));
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--addr", addr]);
        if let Some(url) = store {
            command
                .args(["--store", &url, "--lease-secs", "2"])
                .env("AGENTHOST_MASTER_KEY", TEST_MASTER_KEY);
        }
        // SIGXFSZ ignored (kept across exec): a test that lowers the
        // server's file size limit (`storage.rs`) sees its writes fail with
        // EFBIG, as on a full disk, instead of the process killed.
        // SAFETY: `signal` is async-signal-safe; nothing else runs here.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
        let mut child = command
            .args(flags)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .env("AGENTHOST_BOOTSTRAP_KEY", KEY)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start agenthost");
        let mut pipe = child.stderr.take().expect("stderr");
        let mut file = stderr;
        let drain = std::thread::spawn(move || {
            let _ = std::io::copy(&mut pipe, &mut file);
        });
        let stdout = child.stdout.take().expect("stdout");
        let url = tokio::task::spawn_blocking(move || {
            let mut lines = BufReader::new(stdout).lines();
            for line in lines.by_ref() {
                let line = line.expect("read stdout");
                if let Some(url) = line.strip_prefix("agenthost listening on ") {
                    // Keep draining stdout so the server never blocks on it.
                    std::thread::spawn(move || for _ in lines {});
                    return url.trim().to_string();
                }
            }
            panic!("agenthost exited before listening");
        })
        .await
        .expect("wait for the server");
        let server = Server {
            child,
            url,
            data_dir: data_dir.to_path_buf(),
            client: client(),
            log,
            drain: Some(drain),
        };
        server.assert_engine(engine).await;
        server
    }

    /// Checks that the server runs on `engine` (see `assert_engine`).
    pub async fn assert_engine(&self, engine: &str) {
        assert_engine(&self.client, &self.url, KEY, engine).await;
    }

    /// Sends SIGTERM (graceful shutdown).
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Sends `signal` (e.g. `STOP` to freeze the host, `CONT` to thaw it).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Waits for the process to exit by itself (panics after `timeout`: a hang).
    pub async fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                started.elapsed() < timeout,
                "the server did not exit within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The server's process id (its memory is in `/proc/<pid>/status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.get_as(KEY, path).await
    }

    /// GET with a given key.
    pub async fn get_as(&self, key: &str, path: &str) -> (u16, Value) {
        let response = self
            .client
            .get(self.url(path))
            .bearer_auth(key)
            .send()
            .await
            .expect("GET");
        status_and_json(response).await
    }

    /// POST JSON with a given key.
    pub async fn post_as(&self, key: &str, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .client
            .post(self.url(path))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .expect("POST");
        status_and_json(response).await
    }

    /// Mints a key through the API; returns (id, secret).
    pub async fn mint_key(&self, class: &str, name: &str, app: Option<&str>) -> (String, String) {
        let mut body = json!({"class": class, "name": name});
        if let Some(app) = app {
            body["app"] = json!(app);
        }
        let (status, key) = self.post("/api-keys", body).await;
        assert_eq!(status, 201, "{key}");
        let minted: MintedKey = serde_json::from_value(key).expect("a minted key as documented");
        (minted.view.id, minted.key)
    }

    /// Mints an end-user token for `user` of `app` through the API.
    pub async fn end_user_token(&self, app: &str, user: &str) -> String {
        self.end_user_token_with(app, json!({"user": user})).await
    }

    /// Mints an end-user token with the body `body` (`user`, `claims`, ...).
    pub async fn end_user_token_with(&self, app: &str, body: Value) -> String {
        let (status, token) = self
            .post(&format!("/apps/{app}/end-user-tokens"), body)
            .await;
        assert_eq!(status, 201, "{token}");
        token["token"].as_str().expect("a token").to_string()
    }

    pub async fn delete(&self, path: &str) -> u16 {
        let response = self
            .client
            .delete(self.url(path))
            .bearer_auth(KEY)
            .send()
            .await
            .expect("DELETE");
        response.status().as_u16()
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .client
            .post(self.url(path))
            .bearer_auth(KEY)
            .json(&body)
            .send()
            .await
            .expect("POST");
        status_and_json(response).await
    }

    /// `PUT /secrets/{name}` with the bootstrap key; returns the status and body.
    pub async fn put_secret(&self, name: &str, value: &str) -> (u16, Value) {
        leaks::used("secret value", value);
        let response = self
            .client
            .put(self.url(&format!("/secrets/{name}")))
            .bearer_auth(KEY)
            .json(&json!({"value": value}))
            .send()
            .await
            .expect("PUT /secrets");
        status_and_json(response).await
    }

    /// Uploads a bundle with its manifest; returns the status and body.
    pub async fn upload(&self, bundle: Vec<u8>, manifest: &str) -> (u16, Value) {
        self.upload_with_policy(bundle, manifest, None).await
    }

    /// Uploads a bundle with its manifest and an operator approval policy.
    pub async fn upload_with_policy(
        &self,
        bundle: Vec<u8>,
        manifest: &str,
        policy: Option<&str>,
    ) -> (u16, Value) {
        let mut form = reqwest::multipart::Form::new()
            .part(
                "tarball",
                reqwest::multipart::Part::bytes(bundle).file_name("b.tar"),
            )
            .text("manifest", manifest.to_string());
        if let Some(policy) = policy {
            form = form.text("approval_policy", policy.to_string());
        }
        let response = self
            .client
            .post(self.url("/deployments"))
            .bearer_auth(KEY)
            .multipart(form)
            .send()
            .await
            .expect("upload");
        status_and_json(response).await
    }

    /// Deploys `component` as `entry` of app `slug` and waits for the build.
    pub async fn deploy(&self, slug: &str, component: &[u8]) -> Value {
        let manifest = format!("[app]\nslug = \"{slug}\"\n[agent]\nentry = \"agent.wasm\"\n");
        let (status, row) = self
            .upload(bundle(&[("agent.wasm", component)]), &manifest)
            .await;
        assert_eq!(status, 202, "{row}");
        self.wait_built(&row).await
    }

    /// Uploads a bundle of `files` under `manifest`, waits for its build
    /// and asserts it is active: the deployed row.
    pub async fn deploy_files(&self, files: &[(&str, &[u8])], manifest: &str) -> Value {
        let (status, row) = self.upload(bundle(files), manifest).await;
        assert_eq!(status, 202, "{row}");
        let row = self.wait_built(&row).await;
        assert_eq!(row["status"], "active", "{row}");
        row
    }

    /// Polls the app's deployments until `row` is no longer building.
    pub async fn wait_built(&self, row: &Value) -> Value {
        let started = Instant::now();
        loop {
            let (status, rows) = self
                .get(&format!(
                    "/apps/{}/deployments",
                    row["app_id"].as_str().unwrap()
                ))
                .await;
            assert_eq!(status, 200, "{rows}");
            let views: Vec<DeploymentView> =
                serde_json::from_value(rows.clone()).expect("deployments as documented");
            let index = (views.iter())
                .position(|view| row["id"] == view.id.to_string())
                .expect("row listed");
            if views[index].status != DeploymentStatus::Building {
                // The row as the server wrote it, for the tests' own checks.
                return rows[index].clone();
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "build never finished"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Creates a session; returns its id.
    pub async fn session(&self, app: &str, route: &str, input: Value) -> String {
        let (status, body) = self
            .post(
                "/sessions",
                json!({"app": app, "route": route, "input": input}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        let created: CreatedSession =
            serde_json::from_value(body).expect("a created session as documented");
        created.session.session_id.to_string()
    }

    /// `GET /approvals/events` with `query` (e.g. `?app=ops`), resumed
    /// after `last_event_id` when given.
    pub async fn approval_feed(&self, query: &str, last_event_id: Option<&str>) -> EventStream {
        self.stream(&format!("/approvals/events{query}"), last_event_id)
            .await
    }

    /// Opens the event stream of a session, optionally resuming after `last_event_id`.
    pub async fn events(&self, session: &str, last_event_id: Option<&str>) -> EventStream {
        self.stream(&format!("/sessions/{session}/events"), last_event_id)
            .await
    }

    /// `GET /metrics` with the platform key, as text (OpenMetrics, not JSON).
    pub async fn metrics(&self) -> String {
        let response = (self.client.get(self.url("/metrics")))
            .bearer_auth(KEY)
            .send()
            .await
            .expect("GET /metrics");
        assert_eq!(response.status(), 200);
        response.text().await.expect("metrics text")
    }

    /// A session's journal from its start until `turns` turns have ended
    /// (TURN_ENDED or TURN_ERROR each).
    pub async fn journal(&self, session: &str, turns: usize) -> Vec<Value> {
        let mut stream = self.events(session, None).await;
        let mut out = Vec::new();
        for _ in 0..turns {
            out.extend(stream.until(&["TURN_ENDED", "TURN_ERROR"]).await);
        }
        out
    }

    /// An SSE stream at `path`, which must answer 200.
    async fn stream(&self, path: &str, last_event_id: Option<&str>) -> EventStream {
        let mut request = self.client.get(self.url(path)).bearer_auth(KEY);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().await.expect(path);
        assert_eq!(response.status(), 200, "{path}");
        EventStream::new(response)
    }
}

impl Drop for Server {
    /// Kills the process, then checks its log: no key, token or secret
    /// value the tests used may be in it. A failing test gets the log's end.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(drain) = self.drain.take() {
            let _ = drain.join();
        }
        let path = self.log.path();
        if std::thread::panicking() {
            let tail = leaks::tail(path, 40);
            eprintln!("--- the end of the server's log ({}) ---\n{tail}", self.url);
        } else {
            leaks::check(path);
        }
    }
}

/// Checks, through `GET /metrics` (`agenthost_store_info`) with the
/// platform key `key`, that the server at `base` runs on `engine` (`redb`
/// or `postgres`): the PostgreSQL pass must never pass on redb.
pub async fn assert_engine(client: &reqwest::Client, base: &str, key: &str, engine: &str) {
    let response = (client.get(format!("{base}/metrics")))
        .bearer_auth(key)
        .send()
        .await
        .expect("GET /metrics");
    let status = response.status();
    let text = response.text().await.expect("the metrics");
    assert_eq!(status, 200, "GET /metrics: {text}");
    let line = format!("agenthost_store_info{{engine=\"{engine}\"}} 1");
    assert!(
        text.lines().any(|l| l == line),
        "the server must run on {engine}: no `{line}` in its metrics:\n{text}"
    );
}

pub async fn status_and_json(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"))
    };
    leaks::from_response(&body);
    (status, body)
}

/// A plain tar bundle of `(path, bytes)` files.
pub fn bundle(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for (path, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, path, *bytes).expect("tar");
    }
    tar.into_inner().expect("tar")
}

/// A temp data dir that outlives a server restart.
pub fn data_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// The tests' HTTP client. The server closes a keep-alive connection that
/// stays idle for 30 s (its header-read timeout; docs/limits.md); a client
/// that reuses one just then fails with a broken pipe mid-upload, so the
/// pool lets connections go well before that.
pub fn client() -> reqwest::Client {
    agenthost::install_tls_provider();
    reqwest::Client::builder()
        .pool_idle_timeout(std::time::Duration::from_secs(10))
        .build()
        .expect("an HTTP client")
}

/// The value of the sample `name` (a metric without labels) in the
/// OpenMetrics text of `GET /metrics`; 0 when absent.
pub fn sample(text: &str, name: &str) -> f64 {
    (text.lines())
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

/// RFC 3339 (UTC) `ms` milliseconds from now, as a schedule's `at`.
pub fn from_now(ms: u64) -> String {
    let at = std::time::SystemTime::now() + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(at).to_string()
}
