//! Keys across hosts (docs/scale-out.md, "Keys and secrets"): a key minted
//! through one host works at once through another (the other host looks an
//! id it has not heard of up in PostgreSQL before it refuses it, instead of
//! waiting for the announcement), and a revoked key is refused at once by
//! the host that revoked it, soon by every other, and never comes back.
//!
//! These always run on PostgreSQL (`scripts/test` skips them in its
//! PostgreSQL pass: they ran already).

use std::time::{Duration, Instant};

use crate::support::{self, Server};

/// A database name of this test's own.
fn database(dir: &tempfile::TempDir) -> String {
    let name = dir.path().file_name().unwrap().to_string_lossy();
    let name: String = (name.to_lowercase().chars())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("keys_{name}")
}

#[tokio::test]
async fn a_key_minted_through_one_host_works_at_once_through_another_and_stays_revoked() {
    let (dir_a, dir_b) = (support::data_dir(), support::data_dir());
    let db = database(&dir_a);
    let a = Server::start_host(dir_a.path(), &db).await;
    let b = Server::start_host(dir_b.path(), &db).await;

    // Each key used through B the moment A has answered with it.
    let mut keys = Vec::new();
    for i in 0..20 {
        let (id, key) = a.mint_key("platform", &format!("key {i}"), None).await;
        let (status, body) = b.get_as(&key, "/apps").await;
        assert_eq!(status, 200, "key {i} minted on A was refused on B: {body}");
        keys.push((id, key));
    }
    // A well-formed key nobody minted is refused (it was looked up).
    let unknown = format!("ahp_{}_{}", "0123456789abcdef", "0".repeat(64));
    assert_eq!(b.get_as(&unknown, "/apps").await.0, 401);

    // Revoked through A: A refuses it at once, B once it has heard, and
    // neither takes it back afterwards (a lookup never resurrects a key).
    for (id, key) in &keys[..5] {
        assert_eq!(a.delete(&format!("/api-keys/{id}")).await, 204);
        assert_eq!(a.get_as(key, "/apps").await.0, 401, "A still takes {id}");
        let started = Instant::now();
        while b.get_as(key, "/apps").await.0 != 401 {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "B still takes {id}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for host in [&a, &b] {
            for _ in 0..3 {
                assert_eq!(host.get_as(key, "/apps").await.0, 401, "{id} came back");
            }
        }
    }
    // The others still work on both.
    for (_, key) in &keys[5..] {
        assert_eq!(a.get_as(key, "/apps").await.0, 200);
        assert_eq!(b.get_as(key, "/apps").await.0, 200);
    }
}
