//! End users across hosts on one PostgreSQL (docs/end-users.md): a user
//! revoked through one host is refused (401 `token_revoked`) by the other
//! too, which had already let the token in, and their stream open on the
//! other host ends; a token minted afterwards, through either host, works
//! on both. A user's share of turns a minute holds exactly across hosts
//! (eight creates at once through two hosts: exactly three get in).
//!
//! These always run on PostgreSQL (`scripts/test` skips them in its
//! PostgreSQL pass: they ran already).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::end_user_revocation::{assert_revoked, deploy_shop, open_stream, try_create};
use crate::support::{self, Server};

/// A database name of this test's own.
fn database(dir: &tempfile::TempDir) -> String {
    let name = dir.path().file_name().unwrap().to_string_lossy();
    let name: String = (name.to_lowercase().chars())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("endusers_{name}")
}

async fn two_hosts(manifest: &str) -> (tempfile::TempDir, tempfile::TempDir, Server, Server) {
    let (dir_a, dir_b) = (support::data_dir(), support::data_dir());
    let db = database(&dir_a);
    let a = Server::start_host(dir_a.path(), &db).await;
    let b = Server::start_host(dir_b.path(), &db).await;
    deploy_shop(&a, manifest).await;
    (dir_a, dir_b, a, b)
}

#[tokio::test]
async fn a_user_revoked_through_one_host_is_refused_by_every_host_and_their_streams_end() {
    let manifest = "[app]\nslug = \"shop\"\n[agent]\nentry = \"agent.wasm\"\n[end_users]\n";
    let (_dir_a, _dir_b, a, b) = two_hosts(manifest).await;
    let old = a.end_user_token("shop", "ada").await;
    let (status, created) = try_create(&b, &old).await;
    assert_eq!(status, 201, "{created}");
    let session = created["session_id"].as_str().unwrap().to_string();
    // B has let her token in (and holds that she is not revoked), and
    // serves her open stream.
    let mut stream = open_stream(&b, &old, &session).await;
    assert_eq!(b.get_as(&old, "/sessions").await.0, 200);

    let (status, body) = a.post("/apps/shop/end-users/ada/revoke", json!({})).await;
    assert_eq!(status, 200, "{body}");
    // Refused at once by the host that revoked, soon by the other (its
    // announcement), and her stream on the other host ends.
    assert_revoked(&a.get_as(&old, "/sessions").await);
    let started = Instant::now();
    loop {
        let answer = b.get_as(&old, "/sessions").await;
        if answer.0 == 401 {
            assert_revoked(&answer);
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "B still takes the revoked token: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stream.expect_end(Duration::from_secs(30)).await;
    for host in [&a, &b] {
        assert_revoked(&host.get_as(&old, &format!("/sessions/{session}")).await);
    }
    // A token minted afterwards through either host works on both at once
    // (minting reads the revocation from the store, whatever the clocks say).
    for minter in [&a, &b] {
        let new = minter.end_user_token("shop", "ada").await;
        for host in [&a, &b] {
            let (status, body) = host.get_as(&new, &format!("/sessions/{session}")).await;
            assert_eq!(status, 200, "{body}");
        }
    }
}

#[tokio::test]
async fn an_end_users_share_of_turns_holds_exactly_across_hosts() {
    let (_dir_a, _dir_b, a, b) = two_hosts(crate::end_user_turns::MANIFEST).await;
    let ada = a.end_user_token("shop", "ada").await;
    let bob = b.end_user_token("shop", "bob").await;
    // Eight creates of one user at once, four through each host: exactly
    // three (her share a minute) get in, whichever host took them.
    let creates = (0..8).map(|i| try_create(if i % 2 == 0 { &a } else { &b }, &ada));
    let answers = futures::future::join_all(creates).await;
    let mut statuses: Vec<u16> = answers.iter().map(|(status, _)| *status).collect();
    statuses.sort();
    assert_eq!(
        statuses,
        [201, 201, 201, 429, 429, 429, 429, 429],
        "{answers:?}"
    );
    for (_, body) in answers.iter().filter(|(status, _)| *status == 429) {
        assert_eq!(body["error"]["code"], "quota_exceeded", "{body}");
    }
    // Another user's share is their own, on either host.
    assert_eq!(try_create(&a, &bob).await.0, 201);
    assert_eq!(try_create(&b, &bob).await.0, 201);
}
