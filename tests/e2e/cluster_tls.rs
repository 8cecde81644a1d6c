//! PostgreSQL over TLS (docs/scale-out.md, "TLS"): one PostgreSQL server for
//! this module with `ssl = on`, a test CA and certificates made with
//! openssl, and a `pg_hba.conf` that refuses every plaintext TCP connection.
//! `verify-full` passes and a session runs a turn over it; a wrong CA, a
//! host name the certificate does not name, and `require` against a
//! plaintext server each stop the host at startup with an error naming the
//! parameter; `verify-ca` checks the chain but not the name; a client
//! certificate logs in where the server requires one.
//!
//! These always run on PostgreSQL (`scripts/test` skips them in its
//! PostgreSQL pass: they ran already).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::json;

use crate::support::pg_cluster::{OwnCluster, Setup, give_to_server};
use crate::support::{self, Server};

/// The user who logs in with a client certificate (its CN).
const CERT_USER: &str = "certuser";

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run openssl (scripts/prereqs/12-openssl.sh)");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A CA (`NAME.pem`, `NAME.key`), P-256.
fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.pem"),
        ],
    );
}

/// A certificate `NAME.pem` (key `NAME.key`) for `cn`, signed by `ca`,
/// with the extensions `ext` (an openssl extension file's lines).
fn make_cert(dir: &Path, ca: &str, name: &str, cn: &str, ext: &str) {
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            &format!("/CN={cn}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-days",
            "2",
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-extfile",
            &format!("{name}.ext"),
            "-out",
            &format!("{name}.pem"),
        ],
    );
}

/// The module's server: its certificate names `localhost` and 127.0.0.1,
/// signed by `ca.pem`; `other-ca.pem` is a CA it has nothing to do with;
/// `client.pem` is `certuser`'s certificate.
fn server() -> &'static OwnCluster {
    static SERVER: OnceLock<OwnCluster> = OnceLock::new();
    SERVER.get_or_init(|| {
        let cluster = OwnCluster::lasting(|files| {
            make_ca(files, "ca");
            make_ca(files, "other-ca");
            make_cert(
                files,
                "ca",
                "server",
                "localhost",
                "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
            );
            make_cert(
                files,
                "ca",
                "client",
                CERT_USER,
                "extendedKeyUsage=clientAuth\n",
            );
            for entry in std::fs::read_dir(files).unwrap() {
                let path = entry.unwrap().path();
                give_to_server(&path);
                if path.extension().is_some_and(|e| e == "key") {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                        .unwrap();
                }
            }
            let file = |name: &str| files.join(name).display().to_string();
            Setup {
                conf: vec![
                    "ssl = on".into(),
                    format!("ssl_cert_file = '{}'", file("server.pem")),
                    format!("ssl_key_file = '{}'", file("server.key")),
                    format!("ssl_ca_file = '{}'", file("ca.pem")),
                ],
                hba: Some(format!(
                    "local all all trust\n\
                     hostnossl all all 127.0.0.1/32 reject\n\
                     hostssl all {CERT_USER} 127.0.0.1/32 cert\n\
                     hostssl all all 127.0.0.1/32 trust\n"
                )),
            }
        });
        let mut admin = cluster.admin();
        admin
            .batch_execute(&format!("CREATE ROLE {CERT_USER} LOGIN"))
            .unwrap();
        cluster
    })
}

/// The module's server, its files dir and port (started on first use).
async fn tls() -> (PathBuf, u16) {
    tokio::task::spawn_blocking(|| {
        let server = server();
        (server.files(), server.port())
    })
    .await
    .unwrap()
}

/// Makes database `name` on the module's server, owned by `owner`.
async fn database(name: &str, owner: &str) {
    let (name, owner) = (name.to_string(), owner.to_string());
    tokio::task::spawn_blocking(move || {
        let mut admin = server().admin();
        admin
            .batch_execute(&format!("CREATE DATABASE {name} OWNER {owner}"))
            .unwrap();
    })
    .await
    .unwrap();
}

/// Runs `agenthost serve --store url`, which must stop at startup: its stderr.
async fn startup_error(url: &str) -> String {
    let dir = support::data_dir();
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_agenthost"))
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--addr", "127.0.0.1:0", "--store", url])
        .env("AGENTHOST_MASTER_KEY", support::TEST_MASTER_KEY)
        .env("AGENTHOST_BOOTSTRAP_KEY", support::KEY)
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .unwrap_or_else(|_| panic!("the host started (or hung) with {url}"))
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "the host started with {url}");
    assert!(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .all(|l| !l.contains("listening")),
        "{url}"
    );
    stderr
}

/// How many of database `name`'s connections there are, and whether every
/// one of them is encrypted (read from the server's own statistics).
async fn connections(name: &str) -> (i64, bool) {
    let name = name.to_string();
    tokio::task::spawn_blocking(move || {
        let row = server()
            .admin()
            .query_one(
                "SELECT count(*), coalesce(bool_and(s.ssl), false)
                 FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
                 WHERE a.datname = $1",
                &[&name],
            )
            .unwrap();
        (row.get(0), row.get(1))
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn verify_full_runs_a_turn_with_every_connection_encrypted() {
    let (files, port) = tls().await;
    database("tls_full", "postgres").await;
    let ca = files.join("ca.pem");
    let url = format!(
        "postgres://postgres@127.0.0.1:{port}/tls_full?sslmode=verify-full&sslrootcert={}",
        ca.display()
    );
    let dir = support::data_dir();
    let host = Server::start_on_with(dir.path(), &url, &[]).await;
    host.deploy("hello", &support::guest("hello")).await;
    let session = host.session("hello", "/chat", json!("over tls")).await;
    let events = host
        .events(&session, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:?}");
    // The writer, the listener and the read pool at least; the server
    // refuses plaintext (`hostnossl ... reject`), and says each is TLS.
    let (count, all_tls) = connections("tls_full").await;
    assert!(count >= 3, "{count} connections");
    assert!(all_tls, "a connection of the host is not encrypted");
}

#[tokio::test]
async fn a_wrong_ca_a_wrong_host_name_and_require_against_plaintext_stop_the_host_at_startup() {
    let (files, port) = tls().await;
    database("tls_refused", "postgres").await;
    let (ca, other) = (files.join("ca.pem"), files.join("other-ca.pem"));

    // A CA that did not sign the server's certificate.
    for mode in ["verify-full", "verify-ca", "require"] {
        let url = format!(
            "postgres://postgres@127.0.0.1:{port}/tls_refused?sslmode={mode}&sslrootcert={}",
            other.display()
        );
        let error = startup_error(&url).await;
        assert!(error.contains(&format!("sslmode={mode}")), "{error}");
        assert!(error.contains("sslrootcert="), "{error}");
        assert!(error.contains("invalid peer certificate"), "{error}");
    }

    // The right CA, but a host name the certificate does not name (the
    // address is the server's: `hostaddr`).
    let wrong_name = |mode: &str| {
        format!(
            "postgres://postgres@wrong-name.test:{port}/tls_refused?hostaddr=127.0.0.1&sslmode={mode}&sslrootcert={}",
            ca.display()
        )
    };
    let error = startup_error(&wrong_name("verify-full")).await;
    assert!(error.contains("sslmode=verify-full"), "{error}");
    assert!(error.contains("wrong-name.test"), "{error}");
    // verify-ca checks the chain only: the same URL starts.
    let dir = support::data_dir();
    let host = Server::start_on_with(dir.path(), &wrong_name("verify-ca"), &[]).await;
    assert_eq!(host.get("/apps").await.0, 200);
    drop(host);

    // A server without TLS (the shared test cluster).
    let plain = tokio::task::spawn_blocking(|| support::pg_cluster::database("tls_plaintext"))
        .await
        .unwrap();
    let error = startup_error(&format!("{plain}?sslmode=require")).await;
    assert!(error.contains("sslmode=require"), "{error}");
    assert!(error.contains("TLS"), "{error}");
    let error = startup_error(&format!(
        "{plain}?sslmode=verify-full&sslrootcert={}",
        ca.display()
    ))
    .await;
    assert!(error.contains("sslmode=verify-full"), "{error}");
}

#[tokio::test]
async fn a_client_certificate_logs_in_where_the_server_requires_one() {
    let (files, port) = tls().await;
    database("tls_cert", CERT_USER).await;
    let file = |name: &str| files.join(name).display().to_string();
    let base = format!(
        "postgres://{CERT_USER}@localhost:{port}/tls_cert?sslmode=verify-full&sslrootcert={}",
        file("ca.pem")
    );
    // Without it: refused by the server (`hostssl ... cert`).
    let error = startup_error(&base).await;
    assert!(error.contains("sslmode=verify-full"), "{error}");
    assert!(error.contains("certificate"), "{error}");

    let url = format!(
        "{base}&sslcert={}&sslkey={}",
        file("client.pem"),
        file("client.key")
    );
    let dir = support::data_dir();
    let host = Server::start_on_with(dir.path(), &url, &[]).await;
    host.deploy("hello", &support::guest("hello")).await;
    let session = host.session("hello", "/chat", json!("with a cert")).await;
    let events = host
        .events(&session, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:?}");
}
