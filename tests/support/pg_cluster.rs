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
use std::path::{Path, PathBuf};
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

/// Gives `path` to the account the servers run as (a server refuses a key
/// file it does not own).
pub fn give_to_server(path: &Path) {
    if let Some((uid, gid)) = account() {
        std::os::unix::fs::chown(path, Some(uid), Some(gid))
            .expect("chown to the server's account");
    }
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
    let args = vec![
        "-c".to_string(),
        format!("max_connections={}", max_connections()),
        "-c".to_string(),
        "shared_buffers=64MB".to_string(),
    ];
    spawn_for_process(&base, &data, port, args);
    wait_until_up(port);
    Cluster { port, _dir: base }
}

/// Runs `postgres` on `data` as a child that dies with this process.
fn spawn_for_process(base: &Path, data: &Path, port: u16, args: Vec<String>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let postgres = bindir().join("postgres");
    let (data_arg, socket_dir) = (data.to_path_buf(), base.to_path_buf());
    let log = std::fs::File::create(base.join("log")).expect("create the server's log");
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
            .args(args)
            .stdout(Stdio::null())
            .stderr(log);
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
}

/// A cluster of one test's own, which it may stop and start again (on the
/// same port and data); stopped for good on drop.
pub struct OwnCluster {
    base: PathBuf,
    data: PathBuf,
    port: u16,
}

/// What a test's own cluster is configured with (`OwnCluster::new_with`).
#[derive(Default)]
pub struct Setup {
    /// Lines appended to `postgresql.conf` (e.g. `ssl = on`).
    pub conf: Vec<String>,
    /// The whole `pg_hba.conf`, if not initdb's (trust for everyone).
    pub hba: Option<String>,
}

impl OwnCluster {
    pub fn new() -> OwnCluster {
        OwnCluster::new_with(|_| Setup::default())
    }

    /// A cluster configured by `setup`, which gets a directory of the
    /// cluster's own for the files it needs (certificates, keys: give them
    /// to the server's account with `give_to_server`).
    pub fn new_with(setup: impl FnOnce(&Path) -> Setup) -> OwnCluster {
        let cluster = OwnCluster::configured(setup);
        cluster.start();
        cluster
    }

    fn configured(setup: impl FnOnce(&Path) -> Setup) -> OwnCluster {
        let (base, data) = init(&format!("own-{}", free_port()));
        let files = base.join("files");
        std::fs::create_dir_all(&files).expect("create the cluster's files dir");
        give_to_server(&files);
        let Setup { conf, hba } = setup(&files);
        if !conf.is_empty() {
            let mut text = std::fs::read_to_string(data.join("postgresql.conf"))
                .expect("read postgresql.conf");
            for line in conf {
                text.push_str(&line);
                text.push('\n');
            }
            std::fs::write(data.join("postgresql.conf"), text).expect("write postgresql.conf");
        }
        if let Some(hba) = hba {
            std::fs::write(data.join("pg_hba.conf"), hba).expect("write pg_hba.conf");
        }
        OwnCluster {
            base,
            data,
            port: free_port(),
        }
    }

    /// A cluster configured by `setup` that lives as long as the test
    /// process (shared by a module's tests; it is never stopped before).
    pub fn lasting(setup: impl FnOnce(&Path) -> Setup) -> OwnCluster {
        let cluster = OwnCluster::configured(setup);
        spawn_for_process(&cluster.base, &cluster.data, cluster.port, Vec::new());
        let started = Instant::now();
        while postgres::Config::new()
            .host_path(&cluster.base)
            .port(cluster.port)
            .user("postgres")
            .connect(postgres::NoTls)
            .is_err()
        {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "PostgreSQL did not start: see {}",
                cluster.base.join("log").display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        cluster
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory `setup` got for its files.
    pub fn files(&self) -> PathBuf {
        self.base.join("files")
    }

    /// A connection as the superuser over its Unix socket (whatever
    /// `pg_hba.conf` says of TCP, `local` stays initdb's trust).
    pub fn admin(&self) -> postgres::Client {
        postgres::Config::new()
            .host_path(&self.base)
            .port(self.port)
            .user("postgres")
            .dbname("postgres")
            .connect(postgres::NoTls)
            .expect("connect to the test cluster over its socket")
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
    }

    /// Stops it at once (`immediate`: like a crash of the database server).
    pub fn stop(&self) {
        self.pg_ctl(&["-w", "-m", "immediate", "stop"]);
    }

    /// The URL of database `name` (over TCP), made on first use (over the
    /// socket).
    pub fn database(&self, name: &str) -> String {
        create_database_with(&mut self.admin(), name);
        url_of(self.port, name)
    }
}

/// A primary with a synchronous streaming standby, made with
/// `pg_basebackup -R` (`synchronous_standby_names` names the standby,
/// `synchronous_commit = on`: a commit is acknowledged once the standby
/// has it). Both stopped for good on drop.
pub struct Replicated {
    pub primary: OwnCluster,
    pub standby: OwnCluster,
}

impl Replicated {
    /// The two servers, with database `name` made on the primary first
    /// (the standby copies it): its URL names both servers, writable first
    /// (`target_session_attrs=read-write`).
    pub fn new(name: &str) -> (Replicated, String) {
        // Synchronous once the standby is there (below): before, every
        // commit would wait for it.
        let primary = OwnCluster::new_with(|_| Setup {
            conf: vec![
                "wal_level = replica".into(),
                "max_wal_senders = 4".into(),
                "synchronous_commit = on".into(),
            ],
            hba: Some(
                "local all all trust\n\
                 local replication all trust\n\
                 host all all 127.0.0.1/32 trust\n\
                 host replication all 127.0.0.1/32 trust\n"
                    .into(),
            ),
        });
        primary.database(name);
        let base = std::env::temp_dir().join(format!(
            "agenthost-pg-{}-standby-{}",
            std::process::id(),
            free_port()
        ));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).expect("create the standby's dir");
        give_to_server(&base);
        let data = base.join("data");
        let status = as_account(&mut Command::new(bindir().join("pg_basebackup")))
            .arg("-D")
            .arg(&data)
            .args(["-h", "127.0.0.1", "-p", &primary.port.to_string()])
            .args([
                "-U",
                "postgres",
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
                "--no-sync",
            ])
            .stdout(Stdio::null())
            .status()
            .expect("run pg_basebackup");
        assert!(status.success(), "pg_basebackup failed");
        // The name the primary's `synchronous_standby_names` waits for;
        // once promoted it has no standby of its own to wait for (were it
        // to keep the primary's setting, every commit of the new primary
        // would wait for ever; a failover manager clears it, or names the
        // new primary's own standby).
        let mut conf =
            std::fs::read_to_string(data.join("postgresql.conf")).expect("read postgresql.conf");
        conf.push_str("cluster_name = 'standby'\nsynchronous_standby_names = ''\n");
        std::fs::write(data.join("postgresql.conf"), conf).expect("write postgresql.conf");
        let standby = OwnCluster {
            base,
            data,
            port: free_port(),
        };
        standby.start();
        let mut admin = primary.admin();
        admin
            .batch_execute("ALTER SYSTEM SET synchronous_standby_names = 'standby'")
            .expect("make the standby synchronous");
        admin
            .batch_execute("SELECT pg_reload_conf()")
            .expect("reload the primary's configuration");
        // Streaming and synchronous before anything is written.
        let started = Instant::now();
        loop {
            let state = primary
                .admin()
                .query_opt(
                    "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'",
                    &[],
                )
                .expect("read pg_stat_replication")
                .map(|row| row.get::<_, String>(0));
            if state.as_deref() == Some("sync") {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the standby did not become synchronous: {state:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let url = format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{name}?target_session_attrs=read-write",
            primary.port, standby.port
        );
        (Replicated { primary, standby }, url)
    }

    /// Kills the primary's postmaster with SIGKILL (its backends notice
    /// and exit, as on a crash of the machine's database server).
    pub fn kill_primary(&self) {
        let pid = std::fs::read_to_string(self.primary.data.join("postmaster.pid"))
            .expect("read the primary's postmaster.pid");
        let pid: i32 = pid
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .parse()
            .expect("a pid");
        // SAFETY: kill has no memory preconditions.
        let killed = unsafe { libc::kill(pid, libc::SIGKILL) };
        assert_eq!(killed, 0, "kill the primary");
    }

    /// Promotes the standby and waits until it takes writes.
    pub fn promote(&self) {
        let status = as_account(&mut Command::new(bindir().join("pg_ctl")))
            .arg("-D")
            .arg(&self.standby.data)
            .args(["-w", "promote"])
            .stdout(Stdio::null())
            .status()
            .expect("run pg_ctl promote");
        assert!(status.success(), "pg_ctl promote failed");
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
    create_database_with(&mut admin, name);
    url_of(port, name)
}

fn create_database_with(admin: &mut postgres::Client, name: &str) {
    let exists = admin
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .expect("look the database up")
        .is_some();
    if !exists {
        admin
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .expect("create the database");
    }
}
