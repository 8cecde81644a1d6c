//! A store that cannot commit, by a real cause: on redb the server's file
//! size limit drops to 0 (`RLIMIT_FSIZE`; every write of the journal fails
//! with `EFBIG`, as on a full disk), on PostgreSQL a trigger refuses the
//! rows of `HTTP_REQUEST` events. An outbound request whose `HTTP_REQUEST`
//! is not committed never leaves; on redb the store stops writes (503,
//! `/readyz` 503, until a restart), on PostgreSQL the turn that lost the
//! event ends with `TURN_ERROR` `storage`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::hold::{Hold, deploy_fetch};
use crate::support::{self, Server};

/// Sets the server's file size limit (soft; the hard one stays): 0 makes
/// every write to a regular file fail with `EFBIG` (the harness starts
/// servers with `SIGXFSZ` ignored, so the write fails instead of the process).
fn file_size_limit(server: &Server, bytes: Option<u64>) {
    let limit = libc::rlimit {
        rlim_cur: bytes.unwrap_or(libc::RLIM_INFINITY),
        rlim_max: libc::RLIM_INFINITY,
    };
    let pid = server.pid() as libc::pid_t;
    // SAFETY: prlimit reads `limit` and writes nothing (old limit: null).
    let done = unsafe { libc::prlimit(pid, libc::RLIMIT_FSIZE, &limit, std::ptr::null_mut()) };
    assert_eq!(done, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// Runs `sql` on the PostgreSQL database of `server`'s data dir.
fn on_database(server: &Server, sql: &'static str) {
    let url = support::postgres_store(&server.data_dir).expect("on PostgreSQL");
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
        client.batch_execute(sql).expect(sql);
    })
    .join()
    .expect("run the SQL");
}

/// The value of the metric `name` (no labels) in `GET /metrics`.
async fn metric(server: &Server, name: &str) -> f64 {
    let text = server.metrics().await;
    (text.lines())
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the metrics:\n{text}"))
}

async fn wait_for(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !done().await {
        assert!(started.elapsed() < Duration::from_secs(60), "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn readyz(server: &Server) -> u16 {
    let response = server.client.get(server.url("/readyz")).send().await;
    response.expect("GET /readyz").status().as_u16()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// The guest GETs `first` (held until the store fails), then `second`:
/// the second request's `HTTP_REQUEST` cannot be committed, so it must
/// never reach `second`.
#[tokio::test]
async fn a_request_whose_record_cannot_be_committed_never_leaves() {
    let (first, second) = (Hold::start().await, Hold::start().await);
    let dir = support::data_dir();
    let mut server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    deploy_fetch(&server, &[&first, &second]).await;
    let input = json!({
        "url": format!("{}/first", first.origin),
        "then_url": format!("{}/second", second.origin),
    });
    let session = server.session("fetch", "/fetch", input).await;
    let mut stream = server.events(&session, None).await;
    first.wait_arrived(1).await;
    // The request that arrived is on record: committed before it left.
    let seen = stream.until(&["HTTP_REQUEST"]).await;
    assert_eq!(
        of_type(&seen, "HTTP_REQUEST")[0]["payload"]["path"],
        "/first"
    );

    if support::on_postgres() {
        on_database(
            &server,
            "CREATE FUNCTION refuse_row() RETURNS trigger LANGUAGE plpgsql
               AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
             CREATE TRIGGER refuse_http_request BEFORE INSERT ON events FOR EACH ROW
               WHEN (NEW.type = 'HTTP_REQUEST') EXECUTE FUNCTION refuse_row();",
        );
        first.release();
        // The turn lost an event: it ends with `storage`, and nothing of
        // the lost request is on record (a request that left anyway is
        // held by `second`: then the turn would not end).
        let rest = tokio::select! {
            rest = stream.until(&["TURN_ENDED", "TURN_ERROR"]) => rest,
            () = wait_for("a request at `second`", async || second.arrived() > 0) => Vec::new(),
        };
        assert_eq!(second.arrived(), 0, "a request left without its record");
        let end = rest.last().expect("an end");
        assert_eq!(end["type"], "TURN_ERROR", "{rest:#?}");
        assert_eq!(end["payload"]["kind"], "storage", "{end}");
        assert!(of_type(&rest, "HTTP_REQUEST").is_empty(), "{rest:#?}");
        on_database(&server, "DROP TRIGGER refuse_http_request ON events;");
        return;
    }

    // redb: the disk fails; the first commit after it fails and stops writes.
    file_size_limit(&server, Some(0));
    first.release();
    wait_for("/readyz answers 503", async || readyz(&server).await == 503).await;
    // The disk would take writes again, but writes stay stopped until a
    // restart; the log can be written again.
    file_size_limit(&server, None);
    // The guest has gone on to its second request, and the turn is over
    // (or, if the request left anyway, it is held at `second`).
    wait_for("the turn ended", async || {
        second.arrived() > 0 || metric(&server, "agenthost_turns_running").await == 0.0
    })
    .await;
    assert_eq!(second.arrived(), 0, "a request left without its record");
    let (status, body) = server
        .post(
            "/sessions",
            json!({"app": "fetch", "route": "/fetch", "input": {}}),
        )
        .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    assert_eq!(readyz(&server).await, 503);

    // After a restart: writes again, and the journal holds what was
    // acknowledged; the turn that left a trace is closed, never run again.
    server.kill();
    server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    assert_eq!(readyz(&server).await, 200);
    let events = server
        .events(&session, None)
        .await
        .until(&["TURN_ERROR"])
        .await;
    let requests = of_type(&events, "HTTP_REQUEST");
    assert_eq!(requests.len(), 1, "{events:#?}");
    assert_eq!(requests[0]["payload"]["path"], "/first");
    let end = events.last().expect("an end");
    assert_eq!(end["payload"]["kind"], "host_restarted", "{end}");
    assert_eq!(second.arrived(), 0);
    server
        .session(
            "fetch",
            "/fetch",
            json!({"url": format!("{}/x", first.origin)}),
        )
        .await;
    second.release();
}
