//! End users authenticated by the app's own identity provider: real JWTs
//! signed by PyJWT with RS256 and ES256 keys, whose JWKS a local identity
//! provider serves over HTTP (tests/end-users/idp.py, found through
//! `AGENTHOST_TEST_IDP_PYTHON`); a key rotation picked up without a
//! restart; expired, not yet valid, wrong issuer, wrong audience, unknown
//! `kid`, `alg: none`, HS256 signed with the public key, and a token for
//! another app each refused with 401 and its code.

use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::support::idp::{Idp, claims, now};
use crate::support::{self, Server};

async fn deploy(server: &Server, slug: &str, idp: &Idp) {
    deploy_for(server, slug, &format!("{slug}-api"), idp).await;
}

/// Deploys `slug` taking the provider's tokens for `audience`.
async fn deploy_for(server: &Server, slug: &str, audience: &str, idp: &Idp) {
    idp.deploy_hello(server, slug, audience).await;
}

/// `POST /sessions` of `shop` with `token`.
async fn create(server: &Server, token: &str) -> (u16, Value) {
    let response = server
        .client
        .post(server.url("/sessions"))
        .bearer_auth(token)
        .json(&json!({"app": "shop", "route": "/chat", "input": "hi"}))
        .send()
        .await
        .unwrap();
    support::status_and_json(response).await
}

#[tokio::test]
async fn the_apps_identity_provider_authenticates_its_end_users() {
    let idp = Idp::start();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--allow-insecure-jwks"]).await;
    deploy(&server, "shop", &idp).await;
    deploy(&server, "other", &idp).await;

    // RS256 and ES256 tokens of the app's provider: sessions of their users,
    // with only the claims the app lists.
    for (kid, alg, user) in [("rsa1", "RS256", "ada"), ("ec1", "ES256", "bob")] {
        let token = idp.sign(kid, alg, claims(user, "shop-api")).await;
        let (status, body) = create(&server, &token).await;
        assert_eq!(status, 201, "{alg}: {body}");
        assert_eq!(body["end_user"], user);
        let (status, page) = server.get_as(&token, "/sessions").await;
        assert_eq!(status, 200);
        assert_eq!(page["items"].as_array().unwrap().len(), 1, "{page}");
    }

    // Each refusal with its reason.
    let mut expired = claims("ada", "shop-api");
    expired["exp"] = json!(now() - 120);
    let mut early = claims("ada", "shop-api");
    early["nbf"] = json!(now() + 120);
    let mut wrong_issuer = claims("ada", "shop-api");
    wrong_issuer["iss"] = json!("https://evil.example.test/");
    let cases = [
        (
            "expired",
            idp.sign("rsa1", "RS256", expired).await,
            "token_expired",
        ),
        (
            "not yet valid",
            idp.sign("rsa1", "RS256", early).await,
            "token_not_yet_valid",
        ),
        (
            "wrong issuer",
            idp.sign("rsa1", "RS256", wrong_issuer).await,
            "wrong_issuer",
        ),
        (
            "wrong audience",
            idp.sign("rsa1", "RS256", claims("ada", "nobody-api")).await,
            "wrong_audience",
        ),
        (
            "alg none",
            idp.sign("rsa1", "none", claims("ada", "shop-api")).await,
            "unsupported_algorithm",
        ),
        (
            "HS256 with the public key as secret",
            idp.sign("rsa1", "HS256", claims("ada", "shop-api")).await,
            "unsupported_algorithm",
        ),
        (
            "another app's token",
            idp.sign("rsa1", "RS256", claims("ada", "other-api")).await,
            "token_for_another_app",
        ),
    ];
    for (what, token, code) in cases {
        let (status, body) = create(&server, &token).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (401, Some(code)),
            "{what}: {body}"
        );
    }

    // The provider rotates: a token of its new key is accepted without a
    // restart (the JWKS is fetched again, at most every 10 s).
    idp.post("/rotate").await;
    let rotated = idp.sign("rsa2", "RS256", claims("cy", "shop-api")).await;
    let started = Instant::now();
    loop {
        let (status, body) = create(&server, &rotated).await;
        if status == 201 {
            assert_eq!(body["end_user"], "cy");
            break;
        }
        assert_eq!(body["error"]["code"], "unknown_key", "{body}");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the new key was never fetched"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // A kid the provider never published stays unknown.
    let signed = idp.sign("rsa2", "RS256", claims("cy", "shop-api")).await;
    let (_, rest) = signed.split_once('.').unwrap();
    let header = json!({"alg": "RS256", "typ": "JWT", "kid": "rsa9"});
    let header = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header).unwrap());
    let (status, body) = create(&server, &format!("{header}.{rest}")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unknown_key")),
        "{body}"
    );
}

#[tokio::test]
async fn a_redeploy_that_changes_the_audience_applies_without_a_restart() {
    let idp = Idp::start();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--allow-insecure-jwks"]).await;
    deploy(&server, "shop", &idp).await;
    let old = idp.sign("rsa1", "RS256", claims("ada", "shop-api")).await;
    assert_eq!(create(&server, &old).await.0, 201);
    deploy_for(&server, "shop", "shop-api-v2", &idp).await;
    // The app's provider is read again within 30 s (docs/end-users.md):
    // the old audience is refused from then on, the new one accepted.
    let started = Instant::now();
    loop {
        let (status, body) = create(&server, &old).await;
        if status == 401 {
            assert_eq!(body["error"]["code"], "wrong_audience", "{body}");
            break;
        }
        assert_eq!(status, 201, "{body}");
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the old audience is still taken"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let new = idp
        .sign("rsa1", "RS256", claims("ada", "shop-api-v2"))
        .await;
    let (status, body) = create(&server, &new).await;
    assert_eq!(status, 201, "{body}");
}
