//! Revoking an end user's tokens (docs/end-users.md, "Revoking a user"):
//! `POST /apps/{id}/end-users/{user}/revoke` refuses every token of the
//! user issued until then (401 `token_revoked`), minted or of the app's
//! identity provider (by its `iat`; one without `iat` is refused while the
//! revocation stands), and the stream tokens they were given; their open
//! event streams end; a token issued afterwards works; other users are
//! untouched. The same across two hosts: `cluster_end_users.rs`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::idp::{Idp, claims};
use crate::support::{self, EventStream, Server};

const MANIFEST: &str = "[app]\nslug = \"shop\"\n[agent]\nentry = \"agent.wasm\"\n[end_users]\n";

pub async fn deploy_shop(server: &Server, manifest: &str) {
    let component = support::guest("hello");
    server
        .deploy_files(&[("agent.wasm", &component)], manifest)
        .await;
}

/// `POST /sessions` of `shop` as `token`.
pub async fn try_create(server: &Server, token: &str) -> (u16, Value) {
    let body = json!({"app": "shop", "route": "/chat", "input": "hi"});
    server.post_as(token, "/sessions", body).await
}

/// The open event stream of `session`, read with `token` as the bearer
/// through the first turn's end.
pub async fn open_stream(server: &Server, token: &str, session: &str) -> EventStream {
    let url = server.url(&format!("/sessions/{session}/events"));
    let response = server.client.get(url).bearer_auth(token).send().await;
    let response = response.unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = EventStream::new(response);
    stream.until(&["TURN_ENDED"]).await;
    stream
}

/// The answer to `GET path?token=…` (a stream token), its body dropped.
async fn with_stream_token(server: &Server, session: &str, token: &str) -> u16 {
    let url = server.url(&format!("/sessions/{session}/events?token={token}"));
    let response = server.client.get(url).send().await.unwrap();
    response.status().as_u16()
}

pub fn assert_revoked((status, body): &(u16, Value)) {
    assert_eq!(*status, 401, "{body}");
    assert_eq!(body["error"]["code"], "token_revoked", "{body}");
}

#[tokio::test]
async fn revoking_a_user_refuses_their_earlier_tokens_and_ends_their_streams() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_shop(&server, MANIFEST).await;
    let old = server.end_user_token("shop", "ada").await;
    let bob = server.end_user_token("shop", "bob").await;
    let (status, created) = try_create(&server, &old).await;
    assert_eq!(status, 201, "{created}");
    let session = created["session_id"].as_str().unwrap().to_string();
    let stream_token = created["stream_token"].as_str().unwrap().to_string();
    let mut stream = open_stream(&server, &old, &session).await;
    let (_, bobs) = try_create(&server, &bob).await;
    let bobs_session = bobs["session_id"].as_str().unwrap().to_string();
    let mut bobs_stream = open_stream(&server, &bob, &bobs_session).await;

    // Only a platform key revokes, and only users of an app that exists.
    let path = "/apps/shop/end-users/ada/revoke";
    assert_eq!(server.post_as(&old, path, json!({})).await.0, 403);
    let (status, body) = server
        .post("/apps/nope/end-users/ada/revoke", json!({}))
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("app_not_found"))
    );
    let (status, revoked) = server.post(path, json!({})).await;
    assert_eq!(status, 200, "{revoked}");
    assert_eq!(revoked["user"], "ada");
    assert!(
        revoked["not_before"].as_str().unwrap().ends_with('Z'),
        "{revoked}"
    );

    // Her open stream ends; Bob's stays open.
    stream.expect_end(Duration::from_secs(30)).await;
    bobs_stream.expect_silence(Duration::from_millis(500)).await;
    // Her earlier token is refused everywhere, with its reason, and so is
    // the stream token she was given with it.
    assert_revoked(&server.get_as(&old, &format!("/sessions/{session}")).await);
    assert_revoked(&server.get_as(&old, "/sessions").await);
    assert_revoked(&try_create(&server, &old).await);
    assert_eq!(
        with_stream_token(&server, &session, &stream_token).await,
        401
    );

    // A token minted afterwards reaches her session, and so does the
    // stream token it is given; Bob was never touched.
    let new = server.end_user_token("shop", "ada").await;
    let (status, body) = server.get_as(&new, &format!("/sessions/{session}")).await;
    assert_eq!(status, 200, "{body}");
    let (status, fresh) = server
        .post_as(
            &new,
            &format!("/sessions/{session}/stream-token"),
            json!({}),
        )
        .await;
    assert_eq!(status, 201, "{fresh}");
    let fresh = fresh["stream_token"].as_str().unwrap();
    assert_eq!(with_stream_token(&server, &session, fresh).await, 200);
    assert_eq!(server.get_as(&bob, "/sessions").await.0, 200);

    // Revoking again moves the line on: the token of a moment ago goes too.
    let (status, again) = server.post(path, json!({})).await;
    assert_eq!(status, 200, "{again}");
    assert!(again["not_before"].as_str() > revoked["not_before"].as_str());
    assert_revoked(&server.get_as(&new, "/sessions").await);
    assert_eq!(with_stream_token(&server, &session, fresh).await, 401);

    // The revocation is stored: a restart keeps refusing the old token.
    server.kill();
    let server = Server::start(dir.path()).await;
    assert_revoked(&server.get_as(&old, "/sessions").await);
    let newest = server.end_user_token("shop", "ada").await;
    assert_eq!(server.get_as(&newest, "/sessions").await.0, 200);
}

#[tokio::test]
async fn a_revocation_refuses_identity_provider_tokens_issued_before_it() {
    let idp = Idp::start();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--allow-insecure-jwks"]).await;
    idp.deploy_hello(&server, "shop", "shop-api").await;
    let now = crate::support::idp::now();
    let token = |iat: Option<u64>| {
        let mut claims = claims("ada", "shop-api");
        match iat {
            Some(iat) => claims["iat"] = json!(iat),
            None => drop(claims.as_object_mut().unwrap().remove("iat")),
        }
        idp.sign("rsa1", "RS256", claims)
    };
    let before = token(Some(now - 5)).await;
    let no_iat = token(None).await;
    assert_eq!(server.get_as(&before, "/sessions").await.0, 200);
    assert_eq!(
        server.get_as(&no_iat, "/sessions").await.0,
        200,
        "not revoked yet"
    );

    let (status, body) = server
        .post("/apps/shop/end-users/ada/revoke", json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_revoked(&server.get_as(&before, "/sessions").await);
    // Without `iat` (or `nbf`) a token cannot show it came after.
    assert_revoked(&server.get_as(&no_iat, "/sessions").await);
    // Issued in a later second than the revocation: accepted.
    let after = token(Some(now + 5)).await;
    assert_eq!(server.get_as(&after, "/sessions").await.0, 200);
    // Another user of the same provider is untouched.
    let bob = idp.sign("rsa1", "RS256", claims("bob", "shop-api")).await;
    assert_eq!(server.get_as(&bob, "/sessions").await.0, 200);
}
