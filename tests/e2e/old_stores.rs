//! Stored bytes from an older version: `tests/fixtures/stores/` holds a redb
//! data dir and a PostgreSQL dump (plain SQL from `pg_dump`) made by an
//! earlier build, each with a finished turn, a pending approval, minted keys
//! and a secret. Today's server starts on them and reads everything back
//! over HTTP. `make_the_store_fixtures` made them; it runs only by hand
//! (tests/README.md: they stand for an old version, never remake them
//! casually).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{self, Server, leaks, pg_cluster};

const SECRET: &str = "fixture-secret-4e1b";

fn fixtures() -> PathBuf {
    support::workspace().join("tests/fixtures/stores")
}

fn engine() -> &'static str {
    if support::on_postgres() {
        "postgres"
    } else {
        "redb"
    }
}

/// PostgreSQL's client tools (`psql`, `pg_dump`), where the harness finds
/// the server's.
fn pg_tool(name: &str) -> PathBuf {
    let bindir = std::env::var("AGENTHOST_TEST_PG_BINDIR").unwrap_or_else(|_| {
        let out = Command::new("pg_config").arg("--bindir").output();
        let out = out.expect("pg_config (or set AGENTHOST_TEST_PG_BINDIR)");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    });
    Path::new(&bindir).join(name)
}

fn run(command: &mut Command) {
    let output = command.output().expect("run a PostgreSQL tool");
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Copies what a redb data dir keeps: the database, the master key and each
/// deployment's component (its compiled artifact is remade from it).
fn copy_data_dir(from: &Path, to: &Path) {
    let mut files = vec![PathBuf::from("agenthost.redb"), PathBuf::from("master.key")];
    for entry in std::fs::read_dir(from.join("deployments")).expect("the deployments") {
        let id = entry.expect("a deployment").file_name();
        files.push(Path::new("deployments").join(id).join("component.wasm"));
    }
    for file in files {
        let target = to.join(&file);
        std::fs::create_dir_all(target.parent().unwrap()).expect("a dir");
        std::fs::copy(from.join(&file), &target).unwrap_or_else(|e| panic!("{file:?}: {e}"));
    }
}

/// All events of `session` up to `last_seq`, read from the start.
async fn events(server: &Server, session: &str, last_seq: u64) -> Vec<Value> {
    server.events(session, None).await.until_seq(last_seq).await
}

/// `[id, seq, type]` of each event.
fn summary(events: &[Value]) -> Value {
    (events.iter())
        .map(|e| json!([e["id"], e["seq"], e["type"]]))
        .collect()
}

fn said(events: &[Value]) -> Value {
    (events.iter())
        .rfind(|e| e["type"] == "MESSAGE_END")
        .map(|e| e["payload"]["text"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_store_made_by_an_older_version_reads_back_over_http() {
    let dir = support::data_dir();
    let facts: Value = serde_json::from_slice(
        &std::fs::read(fixtures().join(format!("{}.json", engine()))).expect("the facts"),
    )
    .expect("the facts as JSON");
    let server = if support::on_postgres() {
        // The sync client cannot run on the test's async runtime thread.
        let url = std::thread::spawn(|| pg_cluster::database("t_old_store"))
            .join()
            .expect("the test database");
        let dump = fixtures().join("postgres.sql");
        run(Command::new(pg_tool("psql"))
            .args(["-q", "-v", "ON_ERROR_STOP=1", "-f"])
            .arg(&dump)
            .arg(&url));
        Server::start_on_with(dir.path(), &url, &[]).await
    } else {
        copy_data_dir(&fixtures().join("redb"), dir.path());
        Server::start(dir.path()).await
    };
    let platform = facts["platform_key"].as_str().expect("a platform key");
    let invocation = facts["invocation_key"].as_str().expect("an invocation key");
    leaks::used("platform key", platform);
    leaks::used("invocation key", invocation);
    leaks::used("secret value", SECRET);

    // The minted keys still work: only their hashes were stored.
    let (status, apps) = server.get_as(platform, "/apps").await;
    assert_eq!(status, 200, "{apps}");
    assert!(apps.to_string().contains("\"rogue\""), "{apps}");
    let env = facts["env_session"].as_str().expect("a session");
    let (status, record) = server.get_as(invocation, &format!("/sessions/{env}")).await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["status"], "idle", "{record}");
    assert_eq!(record["turn"], 1, "{record}");
    let (status, _) = server.get_as(&format!("{invocation}x"), "/apps").await;
    assert_eq!(status, 401);

    // Every event, by id and seq, as it was written.
    for (session, expected) in [
        (env, &facts["env_events"]),
        (
            facts["forge_session"].as_str().unwrap(),
            &facts["forge_events"],
        ),
    ] {
        let last = expected.as_array().unwrap().last().unwrap()[1]
            .as_u64()
            .unwrap();
        let read = events(&server, session, last).await;
        assert_eq!(summary(&read), *expected, "{session}: {read:#?}");
    }
    // Resumed after an event id: the next one comes first.
    let expected = facts["env_events"].as_array().unwrap();
    let after = expected[1][0].as_str().unwrap();
    let mut resumed = server.events(env, Some(after)).await;
    let next = resumed.next(std::time::Duration::from_secs(10)).await;
    let next = next.expect("an event after the cursor");
    assert_eq!(json!([next["id"], next["seq"], next["type"]]), expected[2]);

    // The secret unseals: the agent reads the same value (reversed).
    assert_eq!(
        said(&events(&server, env, expected.last().unwrap()[1].as_u64().unwrap()).await),
        facts["env_said"]
    );
    let (status, secrets) = server.get("/secrets").await;
    assert_eq!(status, 200);
    assert!(secrets.to_string().contains("FIXTURE_SECRET"), "{secrets}");
    let (status, body) = server
        .post_as(
            invocation,
            &format!("/sessions/{env}/input"),
            json!({"input": "FIXTURE_SECRET"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let mut stream = server.events(env, None).await;
    let mut turn = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    while turn.last().unwrap()["payload"]["turn"] != 2 {
        turn = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    }
    assert_eq!(turn.last().unwrap()["type"], "TURN_ENDED", "{turn:#?}");
    assert_eq!(said(&turn), facts["env_said"]);

    // The pending approval is listed and decidable, once.
    let forge = facts["forge_session"].as_str().unwrap();
    let (status, pending) = server.get("/approvals").await;
    assert_eq!(status, 200);
    assert!(pending.to_string().contains(forge), "{pending}");
    let path = format!("/sessions/{forge}/approval");
    let (status, body) = server
        .post_as(platform, &path, json!({"approved": false}))
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, _) = server
        .post_as(platform, &path, json!({"approved": false}))
        .await;
    assert_eq!(status, 409);
    let last = facts["forge_events"].as_array().unwrap().last().unwrap()[1].as_u64();
    let mut stream = server.events(forge, None).await;
    stream.until_seq(last.unwrap()).await;
    let resumed = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    let started = (resumed.iter()).filter(|e| e["type"] == "TURN_STARTED");
    assert_eq!(started.count(), 1, "{resumed:#?}");
}

/// Makes `tests/fixtures/stores/` for this pass's engine (redb, or
/// PostgreSQL with `AGENTHOST_TEST_STORE=postgres`). By hand only, and only
/// when a new fixture generation is meant (tests/README.md).
#[tokio::test]
#[ignore = "remakes the stored-bytes fixtures: by hand only (tests/README.md)"]
async fn make_the_store_fixtures() {
    assert!(
        std::env::var("AGENTHOST_MAKE_STORE_FIXTURES").is_ok_and(|v| v == "1"),
        "set AGENTHOST_MAKE_STORE_FIXTURES=1 to remake the fixtures (tests/README.md)"
    );
    let dir = support::data_dir();
    let mut server = Server::start(dir.path()).await;
    assert_eq!(server.put_secret("FIXTURE_SECRET", SECRET).await.0, 201);
    let manifest = "[app]\nslug = \"rogue\"\n[agent]\nentry = \"agent.wasm\"\nsecrets = [\"FIXTURE_SECRET\"]\n";
    let rogue = support::guest("rogue");
    let (status, row) = (server.upload(support::bundle(&[("agent.wasm", &rogue)]), manifest)).await;
    assert_eq!(status, 202, "{row}");
    assert_eq!(server.wait_built(&row).await["status"], "active");
    let (_, platform) = server.mint_key("platform", "fixture-platform", None).await;
    let (_, invocation) =
        (server.mint_key("invocation", "fixture-invocation", Some("rogue"))).await;

    let env = server
        .session("rogue", "/env", json!("FIXTURE_SECRET"))
        .await;
    let env_events = server.events(&env, None).await.until(&["TURN_ENDED"]).await;
    let forge = server.session("rogue", "/forge", json!("go")).await;
    let forge_events = (server.events(&forge, None).await)
        .until(&["TOOL_APPROVAL_REQUIRED"])
        .await;
    let facts = json!({
        "made_by": "make_the_store_fixtures",
        "platform_key": platform,
        "invocation_key": invocation,
        "env_session": env,
        "env_events": summary(&env_events),
        "env_said": said(&env_events),
        "forge_session": forge,
        "forge_events": summary(&forge_events),
    });
    server.terminate();
    server.wait_exit(std::time::Duration::from_secs(60)).await;

    let out = fixtures();
    std::fs::create_dir_all(&out).unwrap();
    if let Some(url) = support::postgres_store(dir.path()) {
        run(Command::new(pg_tool("pg_dump"))
            .args(["--no-owner", "--no-privileges", "-f"])
            .arg(out.join("postgres.sql"))
            .arg(&url));
    } else {
        copy_data_dir(dir.path(), &out.join("redb"));
    }
    let facts = serde_json::to_string_pretty(&facts).unwrap() + "\n";
    std::fs::write(out.join(format!("{}.json", engine())), facts).unwrap();
}
