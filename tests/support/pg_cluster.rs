//! A real PostgreSQL for tests: one cluster per test process, made with
//! Debian's `initdb` in a temp dir and run as the unprivileged `postgres`
//! account when the tests run as root, on a free port of 127.0.0.1. It
//! dies with the test process. Each caller gets a database of its own.
//!
//! Shared by the unit tests (`#[path]`-included) and the e2e support.
//!
//! The shared cluster's `max_connections` fits every server the test
//! process can run at once (`max_connections`): a server that cannot
//! connect fails its test, so it must be the code, not the cluster.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

struct Cluster {
    port: u16,
    /// Keeps the cluster's directory until the process exits.
    _dir: PathBuf,
}

fn bindir() -> PathBuf {
    if let Ok(dir) = std::env::var("AGENTHOST_TEST_PG_BINDIR") {
        return PathBuf::from(dir);
    }
    let out = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .expect("PostgreSQL is needed for these tests: run scripts/test, or install postgresql (pg_config not found)");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The uid and gid to run PostgreSQL as: ours, unless we are root.
fn account() -> Option<(u32, u32)> {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return None;
    }
    let out = Command::new("id").args(["-u", "postgres"]).output().ok()?;
    let uid = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    let out = Command::new("id").args(["-g", "postgres"]).output().ok()?;
    let gid = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    Some((uid, gid))
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

fn as_account(command: &mut Command) -> &mut Command {
    if let Some((uid, gid)) = account() {
        command.uid(uid).gid(gid);
    }
    command
}

/// Removes the cluster directories of test processes that are gone: a
/// process's shared cluster lives until it exits (its server dies with it),
/// so nothing else removes its directory, and each holds 1.5 GB or more.
fn sweep_stale() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("agenthost-pg-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().filter(|p| p.parse::<u32>().is_ok()) else {
            continue;
        };
        if !std::path::Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A fresh cluster directory with `initdb` run in it: (base dir, data dir).
fn init(label: &str) -> (PathBuf, PathBuf) {
    sweep_stale();
    let base = std::env::temp_dir().join(format!("agenthost-pg-{}-{label}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("create the cluster dir");
    if let Some((uid, gid)) = account() {
        std::os::unix::fs::chown(&base, Some(uid), Some(gid)).expect("chown the cluster dir");
    }
    let data = base.join("data");
    let status = as_account(&mut Command::new(bindir().join("initdb")))
        .args(["-D"])
        .arg(&data)
        .args(["-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"])
        .stdout(Stdio::null())
        .status()
        .expect("run initdb");
    assert!(status.success(), "initdb failed");
    (base, data)
}

fn wait_until_up(port: u16) {
    let started = Instant::now();
    loop {
        if postgres::Client::connect(&url_of(port, "postgres"), postgres::NoTls).is_ok() {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "PostgreSQL did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Connections one server may hold: its read pool (16,
/// host/src/store/postgres/mod.rs), its writer, its listener and its lease
/// keeper, and one more while it opens (the schema migration).
const PER_SERVER: usize = 16 + 3 + 1;

/// Servers one test runs at once, at most (the cluster tests' three hosts,
/// one being restarted).
const SERVERS_PER_TEST: usize = 4;

/// The tests the harness runs at once: `--test-threads`, else
/// `RUST_TEST_THREADS`, else the number of CPUs (libtest's own order).
fn test_threads() -> usize {
    let mut args = std::env::args();
    while let Some(arg) = args.next() {
        let value = match arg.strip_prefix("--test-threads") {
            Some("") => args.next(),
            Some(rest) => rest.strip_prefix('=').map(str::to_string),
            None => continue,
        };
        if let Some(n) = value.and_then(|v| v.parse().ok()) {
            return n;
        }
    }
    if let Some(n) = std::env::var("RUST_TEST_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return n;
    }
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// `max_connections` for the shared cluster: every server every test
/// thread may run, plus the tests' own clients (100 slots); 400 at least.
fn max_connections() -> usize {
    (test_threads() * SERVERS_PER_TEST * PER_SERVER + 100).max(400)
}

fn start() -> Cluster {
    let (base, data) = init("shared");
    let port = free_port();
    let (tx, rx) = std::sync::mpsc::channel();
    let postgres = bindir().join("postgres");
    let (data_arg, socket_dir) = (data.clone(), base.clone());
    // A thread that lives as long as the process owns the server, so the
    // server gets SIGKILL when the test process ends (PDEATHSIG is per thread).
    std::thread::spawn(move || {
        let mut command = Command::new(postgres);
        command
            .arg("-D")
            .arg(&data_arg)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .arg("-k")
            .arg(&socket_dir)
            .args(["-c", &format!("max_connections={}", max_connections())])
            .args(["-c", "shared_buffers=64MB"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        as_account(&mut command);
        // SAFETY: prctl is async-signal-safe.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command.spawn();
        let _ = tx.send(child.map(|c| c.id()).map_err(|e| e.to_string()));
        loop {
            std::thread::park();
        }
    });
    rx.recv()
        .expect("the postgres thread answers")
        .expect("start postgres");
    wait_until_up(port);
    Cluster { port, _dir: base }
}

/// A cluster of one test's own, which it may stop and start again (on the
/// same port and data); stopped for good on drop.
pub struct OwnCluster {
    base: PathBuf,
    data: PathBuf,
    port: u16,
}

impl OwnCluster {
    pub fn new() -> OwnCluster {
        let (base, data) = init(&format!("own-{}", free_port()));
        let cluster = OwnCluster {
            base,
            data,
            port: free_port(),
        };
        cluster.start();
        cluster
    }

    fn pg_ctl(&self, args: &[&str]) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.base.display()
        );
        let status = as_account(&mut Command::new(bindir().join("pg_ctl")))
            .arg("-D")
            .arg(&self.data)
            .args(["-o", &options, "-l"])
            .arg(self.base.join("log"))
            .args(args)
            .stdout(Stdio::null())
            .status()
            .expect("run pg_ctl");
        assert!(status.success(), "pg_ctl {args:?} failed");
    }

    /// Starts it and waits until it accepts connections.
    pub fn start(&self) {
        self.pg_ctl(&["-w", "start"]);
        wait_until_up(self.port);
    }

    /// Stops it at once (`immediate`: like a crash of the database server).
    pub fn stop(&self) {
        self.pg_ctl(&["-w", "-m", "immediate", "stop"]);
    }

    /// The URL of database `name`, made on first use.
    pub fn database(&self, name: &str) -> String {
        create_database(self.port, name)
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = as_account(&mut Command::new(bindir().join("pg_ctl")))
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn url_of(port: u16, db: &str) -> String {
    format!("postgres://postgres@127.0.0.1:{port}/{db}")
}

fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(start)
}

/// The URL of database `name` (made on first use) in this process's cluster.
pub fn database(name: &str) -> String {
    create_database(cluster().port, name)
}

fn create_database(port: u16, name: &str) -> String {
    let mut admin = postgres::Client::connect(&url_of(port, "postgres"), postgres::NoTls)
        .expect("connect to the test cluster");
    let exists = admin
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .expect("look the database up")
        .is_some();
    if !exists {
        admin
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .expect("create the database");
    }
    url_of(port, name)
}
