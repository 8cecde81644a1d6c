//! The JWKS verifier against a real JWKS endpoint: a small HTTP server on
//! 127.0.0.1 serving keys from `testdata/` (made with openssl: RSA 2048 in
//! PKCS#1, P-256 and Ed25519 in PKCS#8), tokens signed with them.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use super::fetch::MAX_JWKS_BYTES;
use super::{JwksConfig, JwksVerifier, LEEWAY_SECS, MAX_KEY_AGE, REFETCH_INTERVAL};

const ISSUER: &str = "https://id.example.com/";
const AUDIENCE: &str = "app-123";

const RSA1: &str = include_str!("testdata/rsa1.pem");
const RSA1_PUBLIC: &str = include_str!("testdata/rsa1.pub.pem");
const RSA2: &str = include_str!("testdata/rsa2.pem");
const EC1: &str = include_str!("testdata/ec1.pem");
const ED1: &str = include_str!("testdata/ed1.pem");

fn rsa1() -> EncodingKey {
    EncodingKey::from_rsa_pem(RSA1.as_bytes()).unwrap()
}
fn rsa2() -> EncodingKey {
    EncodingKey::from_rsa_pem(RSA2.as_bytes()).unwrap()
}
fn ec1() -> EncodingKey {
    EncodingKey::from_ec_pem(EC1.as_bytes()).unwrap()
}
fn ed1() -> EncodingKey {
    EncodingKey::from_ed_pem(ED1.as_bytes()).unwrap()
}

/// The public JWK of `key` for `alg`, named `kid`.
fn jwk(key: &EncodingKey, alg: Algorithm, kid: &str) -> Value {
    let mut jwk = Jwk::from_encoding_key(key, alg).unwrap();
    jwk.common.key_id = Some(kid.to_string());
    serde_json::to_value(jwk).unwrap()
}

fn jwks(keys: Vec<Value>) -> String {
    json!({ "keys": keys }).to_string()
}

/// The usual set: an RSA, a P-256 and an Ed25519 key.
fn usual_jwks() -> String {
    jwks(vec![
        jwk(&rsa1(), Algorithm::RS256, "rsa1"),
        jwk(&ec1(), Algorithm::ES256, "ec1"),
        jwk(&ed1(), Algorithm::EdDSA, "ed1"),
    ])
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// Valid claims for this app, with `change` applied.
fn claims(change: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Value {
    let now = now();
    let mut claims = json!({
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "user-1",
        "exp": now + 600,
        "nbf": now - 5,
        "iat": now - 5,
        "email": "ada@example.com",
        "name": "Ada",
        "role": "admin",
    });
    if let Value::Object(map) = &mut claims {
        change(map);
    }
    claims
}

fn sign(alg: Algorithm, kid: &str, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_string());
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

fn rs256(claims: &Value) -> String {
    sign(Algorithm::RS256, "rsa1", &rsa1(), claims)
}

fn b64(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

/// What the test server answers.
#[derive(Clone)]
enum Reply {
    Jwks(String),
    /// The same, without a Content-Length (chunked).
    Chunked(String),
    Status(u16),
    Redirect(String),
}

/// A JWKS endpoint on 127.0.0.1 that counts the requests it gets.
struct JwksServer {
    addr: SocketAddr,
    reply: Arc<Mutex<Reply>>,
    hits: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl JwksServer {
    async fn start(reply: Reply) -> JwksServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (reply, hits) = (Arc::new(Mutex::new(reply)), Arc::new(AtomicUsize::new(0)));
        let (shared_reply, shared_hits) = (reply.clone(), hits.clone());
        let connections = Arc::new(AtomicUsize::new(0));
        let accepted = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                accepted.fetch_add(1, Ordering::SeqCst);
                let (reply, hits) = (shared_reply.clone(), shared_hits.clone());
                let service = hyper::service::service_fn(move |_request| {
                    hits.fetch_add(1, Ordering::SeqCst);
                    let reply = reply.lock().unwrap().clone();
                    async move { Ok::<_, Infallible>(respond(reply)) }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service),
                );
            }
        });
        JwksServer {
            addr,
            reply,
            hits,
            connections,
            task,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/.well-known/jwks.json", self.addr)
    }

    fn serve(&self, reply: Reply) {
        *self.reply.lock().unwrap() = reply;
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// A verifier for this app (`claims = ["email", "name"]`), with
    /// `--allow-insecure-jwks` (plain http to 127.0.0.1).
    fn verifier(&self) -> JwksVerifier {
        JwksVerifier::new(config(&self.url()), true).unwrap()
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn respond(reply: Reply) -> hyper::Response<Body> {
    let builder = hyper::Response::builder().header("content-type", "application/json");
    let response = match reply {
        Reply::Jwks(body) => builder.body(Full::new(Bytes::from(body)).boxed()),
        Reply::Chunked(body) => {
            let chunks: Vec<Result<Frame<Bytes>, Infallible>> = (body.into_bytes().chunks(4096))
                .map(|chunk| Ok(Frame::data(Bytes::copy_from_slice(chunk))))
                .collect();
            builder.body(StreamBody::new(futures::stream::iter(chunks)).boxed())
        }
        Reply::Status(status) => builder
            .status(status)
            .body(Full::new(Bytes::from_static(b"{}")).boxed()),
        Reply::Redirect(to) => builder
            .status(302)
            .header("location", to)
            .body(Full::new(Bytes::new()).boxed()),
    };
    response.unwrap()
}

fn config(url: &str) -> JwksConfig {
    JwksConfig {
        jwks_url: url.to_string(),
        issuer: ISSUER.to_string(),
        audience: AUDIENCE.to_string(),
        claims: vec!["email".to_string(), "name".to_string()],
    }
}

/// The code of the refusal of `token`.
async fn refusal(verifier: &JwksVerifier, token: &str) -> &'static str {
    match verifier.verify(token).await {
        Ok(user) => panic!("accepted: {user:?}"),
        Err(err) => err.code(),
    }
}

#[tokio::test]
async fn rs256_es256_and_eddsa_tokens_verify() {
    let server = JwksServer::start(Reply::Jwks(usual_jwks())).await;
    let verifier = server.verifier();
    let claims = claims(|_| {});
    for token in [
        sign(Algorithm::RS256, "rsa1", &rsa1(), &claims),
        sign(Algorithm::ES256, "ec1", &ec1(), &claims),
        sign(Algorithm::EdDSA, "ed1", &ed1(), &claims),
    ] {
        let user = verifier.verify(&token).await.unwrap();
        assert_eq!(user.sub, "user-1");
        assert_eq!(Some(user.expires_at), claims["exp"].as_u64());
    }
    assert_eq!(server.hits(), 1, "the keys are cached");
}

#[tokio::test]
async fn only_the_allowed_claims_pass() {
    let server = JwksServer::start(Reply::Jwks(usual_jwks())).await;
    let verifier = server.verifier();
    let user = verifier.verify(&rs256(&claims(|_| {}))).await.unwrap();
    assert_eq!(
        Value::Object(user.claims),
        json!({"email": "ada@example.com", "name": "Ada"}),
        "role, iss, aud, iat... are dropped"
    );
    // An allowed claim the token lacks is simply absent.
    let token = rs256(&claims(|c| {
        c.remove("name");
    }));
    let user = verifier.verify(&token).await.unwrap();
    assert_eq!(
        Value::Object(user.claims),
        json!({"email": "ada@example.com"})
    );
}

#[tokio::test]
async fn time_claims_hold_within_a_minute_of_skew() {
    let server = JwksServer::start(Reply::Jwks(usual_jwks())).await;
    let verifier = server.verifier();
    let now = now();
    let skew = LEEWAY_SECS / 2;
    let late = LEEWAY_SECS + 60;
    let token = |exp: u64, nbf: u64| {
        rs256(&claims(|c| {
            c.insert("exp".into(), exp.into());
            c.insert("nbf".into(), nbf.into());
        }))
    };
    assert_eq!(
        refusal(&verifier, &token(now - late, now - 3600)).await,
        "token_expired"
    );
    assert_eq!(
        refusal(&verifier, &token(now + 3600, now + late)).await,
        "token_not_yet_valid"
    );
    // Within the leeway, both pass.
    verifier
        .verify(&token(now - skew, now - 3600))
        .await
        .unwrap();
    verifier
        .verify(&token(now + 3600, now + skew))
        .await
        .unwrap();
    // exp is required; a non-numeric nbf is refused.
    let no_exp = rs256(&claims(|c| {
        c.remove("exp");
    }));
    assert_eq!(refusal(&verifier, &no_exp).await, "malformed_token");
    let text_nbf = rs256(&claims(|c| {
        c.insert("nbf".into(), "yesterday".into());
    }));
    assert_eq!(refusal(&verifier, &text_nbf).await, "malformed_token");
}

#[tokio::test]
async fn issuer_audience_and_subject_must_be_the_apps() {
    let server = JwksServer::start(Reply::Jwks(usual_jwks())).await;
    let verifier = server.verifier();
    let with = |name: &str, value: Value| {
        rs256(&claims(|c| {
            c.insert(name.into(), value);
        }))
    };
    let without = |name: &str| {
        rs256(&claims(|c| {
            c.remove(name);
        }))
    };
    for (token, code) in [
        (
            with("iss", json!("https://evil.example.com/")),
            "wrong_issuer",
        ),
        (with("iss", json!("https://id.example.com")), "wrong_issuer"),
        (with("iss", json!([ISSUER])), "wrong_issuer"),
        (without("iss"), "wrong_issuer"),
        (with("aud", json!("app-456")), "wrong_audience"),
        (with("aud", json!(["app-456", "app-789"])), "wrong_audience"),
        (with("aud", json!([])), "wrong_audience"),
        (without("aud"), "wrong_audience"),
        (without("sub"), "malformed_token"),
        (with("sub", json!("")), "malformed_token"),
        (with("sub", json!(42)), "malformed_token"),
        (with("sub", json!("u".repeat(257))), "malformed_token"),
    ] {
        assert_eq!(refusal(&verifier, &token).await, code);
    }
    // aud may be an array that includes the app.
    let user = verifier
        .verify(&with("aud", json!(["other", AUDIENCE])))
        .await
        .unwrap();
    assert_eq!(user.sub, "user-1");
}

#[tokio::test]
async fn only_asymmetric_algorithms_are_accepted() {
    let server = JwksServer::start(Reply::Jwks(usual_jwks())).await;
    let verifier = server.verifier();
    let claims = claims(|_| {});

    // alg none, in any spelling, with and without a signature.
    for alg in ["none", "None", "NONE", "nOnE"] {
        let header = b64(&json!({"alg": alg, "kid": "rsa1", "typ": "JWT"}));
        let unsigned = format!("{header}.{}.", b64(&claims));
        assert_eq!(refusal(&verifier, &unsigned).await, "unsupported_algorithm");
    }

    // The classic confusion: HS256 with the RSA public key as the secret,
    // as PEM text and as the JWK's modulus; and other HMAC and RSA/EC variants.
    let public_pem = EncodingKey::from_secret(RSA1_PUBLIC.as_bytes());
    let jwk_rsa1 = jwk(&rsa1(), Algorithm::RS256, "rsa1");
    let modulus = URL_SAFE_NO_PAD
        .decode(jwk_rsa1["n"].as_str().unwrap())
        .unwrap();
    for (alg, key) in [
        (Algorithm::HS256, public_pem.clone()),
        (Algorithm::HS384, public_pem.clone()),
        (Algorithm::HS512, public_pem),
        (Algorithm::HS256, EncodingKey::from_secret(&modulus)),
        (
            Algorithm::HS256,
            EncodingKey::from_secret(jwk_rsa1.to_string().as_bytes()),
        ),
    ] {
        let token = sign(alg, "rsa1", &key, &claims);
        assert_eq!(refusal(&verifier, &token).await, "unsupported_algorithm");
    }
    for (alg, kid, key) in [
        (Algorithm::PS256, "rsa1", rsa1()),
        (Algorithm::RS512, "rsa1", rsa1()),
    ] {
        let token = sign(alg, kid, &key, &claims);
        assert_eq!(refusal(&verifier, &token).await, "unsupported_algorithm");
    }
    // An accepted algorithm with a key of another type: no such key.
    let es256_naming_rsa = sign(Algorithm::ES256, "rsa1", &ec1(), &claims);
    assert_eq!(refusal(&verifier, &es256_naming_rsa).await, "unknown_key");
}

#[tokio::test]
async fn a_symmetric_key_in_the_jwks_is_never_used() {
    let secret = b"a shared secret that the JWKS should never have held";
    let oct = json!({"kty": "oct", "kid": "shared", "k": URL_SAFE_NO_PAD.encode(secret)});
    let server = JwksServer::start(Reply::Jwks(jwks(vec![
        oct,
        jwk(&rsa1(), Algorithm::RS256, "rsa1"),
    ])))
    .await;
    let verifier = server.verifier();
    let claims = claims(|_| {});
    let hs256 = sign(
        Algorithm::HS256,
        "shared",
        &EncodingKey::from_secret(secret),
        &claims,
    );
    assert_eq!(refusal(&verifier, &hs256).await, "unsupported_algorithm");
    let rs256_naming_oct = sign(Algorithm::RS256, "shared", &rsa1(), &claims);
    assert_eq!(refusal(&verifier, &rs256_naming_oct).await, "unknown_key");
    // The RSA key beside it still works.
    verifier.verify(&rs256(&claims)).await.unwrap();
}

#[tokio::test]
async fn a_bad_signature_is_refused() {
    let server = JwksServer::start(Reply::Jwks(usual_jwks())).await;
    let verifier = server.verifier();
    let claims = claims(|_| {});
    // Signed by another key under rsa1's kid.
    let forged = sign(Algorithm::RS256, "rsa1", &rsa2(), &claims);
    assert_eq!(refusal(&verifier, &forged).await, "invalid_signature");
    // The same, with the forger's key embedded in the header (`jwk`): ignored.
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("rsa1".to_string());
    header.jwk = Some(serde_json::from_value(jwk(&rsa2(), Algorithm::RS256, "rsa1")).unwrap());
    let embedded = jsonwebtoken::encode(&header, &claims, &rsa2()).unwrap();
    assert_eq!(refusal(&verifier, &embedded).await, "invalid_signature");
    // A genuine token whose claims were changed after signing.
    let genuine = sign(Algorithm::ES256, "ec1", &ec1(), &claims);
    let mut parts: Vec<&str> = genuine.split('.').collect();
    let other = b64(&claims_with_sub("user-2"));
    parts[1] = &other;
    assert_eq!(
        refusal(&verifier, &parts.join(".")).await,
        "invalid_signature"
    );
    // A signature from the right key over another token.
    let other_token = sign(Algorithm::EdDSA, "ed1", &ed1(), &claims_with_sub("user-2"));
    let spliced = format!(
        "{}.{}",
        genuine.rsplit_once('.').unwrap().0,
        other_token.rsplit_once('.').unwrap().1
    );
    assert_eq!(refusal(&verifier, &spliced).await, "invalid_signature");
}

/// `message` (a header and payload) with rsa1's valid signature.
fn signed(message: &str) -> String {
    let signature =
        jsonwebtoken::crypto::sign(message.as_bytes(), &rsa1(), Algorithm::RS256).unwrap();
    format!("{message}.{signature}")
}

fn claims_with_sub(sub: &str) -> Value {
    claims(|c| {
        c.insert("sub".into(), sub.into());
    })
}

#[tokio::test]
async fn malformed_tokens_are_refused() {
    let server = JwksServer::start(Reply::Jwks(usual_jwks())).await;
    let verifier = server.verifier();
    let genuine = rs256(&claims(|_| {}));
    let header = b64(&json!({"alg": "RS256", "kid": "rsa1"}));
    let crit = b64(&json!({"alg": "RS256", "kid": "rsa1", "crit": ["b64"], "b64": false}));
    let (_, body_and_signature) = genuine.split_once('.').unwrap();
    for token in [
        String::new(),
        "not a token".to_string(),
        "a.b".to_string(),
        "a.b.c.d.e".to_string(),
        format!("{genuine}.extra"),
        format!("!!!.{body_and_signature}"),
        format!("{}.{body_and_signature}", b64(&json!(["RS256"]))),
        signed(&format!("{header}.{}", URL_SAFE_NO_PAD.encode("not JSON"))),
        signed(&format!("{header}.{}", b64(&json!(["a", "list"])))),
        signed(&format!("{header}.not base64")),
        format!("{crit}.{body_and_signature}"),
        format!("{genuine}{}", "A".repeat(super::MAX_TOKEN_BYTES)),
    ] {
        assert_eq!(
            refusal(&verifier, &token).await,
            "malformed_token",
            "{token:.80}"
        );
    }
    let no_kid = sign(Algorithm::RS256, "", &rsa1(), &claims(|_| {}));
    assert_eq!(refusal(&verifier, &no_kid).await, "unknown_key");
}

#[tokio::test]
async fn a_rotated_key_is_picked_up_without_a_new_verifier() {
    let server = JwksServer::start(Reply::Jwks(jwks(vec![jwk(
        &rsa1(),
        Algorithm::RS256,
        "rsa1",
    )])))
    .await;
    let verifier = server.verifier();
    let claims = claims(|_| {});
    verifier.verify(&rs256(&claims)).await.unwrap();
    assert_eq!(server.hits(), 1);

    // The provider rotates: rsa2 replaces rsa1.
    server.serve(Reply::Jwks(jwks(vec![jwk(
        &rsa2(),
        Algorithm::RS256,
        "rsa2",
    )])));
    let rotated = sign(Algorithm::RS256, "rsa2", &rsa2(), &claims);
    verifier.pretend_fetched(REFETCH_INTERVAL).await;
    let user = verifier.verify(&rotated).await.unwrap();
    assert_eq!(user.sub, "user-1");
    assert_eq!(server.hits(), 2);

    // The retired key is gone with the refetch; asking again fetches
    // nothing within the interval.
    assert_eq!(refusal(&verifier, &rs256(&claims)).await, "unknown_key");
    verifier.verify(&rotated).await.unwrap();
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn a_flood_of_unknown_kids_fetches_at_most_once() {
    let server = JwksServer::start(Reply::Jwks(usual_jwks())).await;
    let verifier = server.verifier();
    let claims = claims(|_| {});
    verifier.verify(&rs256(&claims)).await.unwrap();
    assert_eq!(server.hits(), 1);

    // Past the interval, 50 tokens with unknown kids at once.
    verifier.pretend_fetched(REFETCH_INTERVAL).await;
    let tokens: Vec<String> = (0..50)
        .map(|i| sign(Algorithm::EdDSA, &format!("unknown-{i}"), &ed1(), &claims))
        .collect();
    let codes =
        futures::future::join_all(tokens.iter().map(|token| refusal(&verifier, token))).await;
    assert!(codes.iter().all(|code| *code == "unknown_key"), "{codes:?}");
    assert_eq!(server.hits(), 2, "one refetch for the whole flood");

    // And one after another: none.
    for token in &tokens {
        assert_eq!(refusal(&verifier, token).await, "unknown_key");
    }
    assert_eq!(server.hits(), 2);
    // Known keys were served from the cache throughout.
    verifier.verify(&rs256(&claims)).await.unwrap();
    assert_eq!(server.hits(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_on_a_cold_cache_fetches_once() {
    let server = JwksServer::start(Reply::Jwks(usual_jwks())).await;
    let verifier = Arc::new(server.verifier());
    let claims = claims(|_| {});
    let tasks: Vec<_> = (0..30)
        .map(|i| {
            let (verifier, claims) = (verifier.clone(), claims.clone());
            let token = match i % 3 {
                0 => sign(Algorithm::RS256, "rsa1", &rsa1(), &claims),
                1 => sign(Algorithm::ES256, "ec1", &ec1(), &claims),
                _ => sign(Algorithm::EdDSA, "ed1", &ed1(), &claims),
            };
            tokio::spawn(async move { verifier.verify(&token).await.map(|user| user.sub) })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap().unwrap(), "user-1");
    }
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn old_keys_are_refreshed_and_kept_if_the_provider_is_down() {
    let server = JwksServer::start(Reply::Jwks(usual_jwks())).await;
    let verifier = server.verifier();
    let token = rs256(&claims(|_| {}));
    verifier.verify(&token).await.unwrap();

    // Past their age, with the provider failing: the known key stands.
    server.serve(Reply::Status(503));
    verifier.pretend_fetched(MAX_KEY_AGE).await;
    verifier.verify(&token).await.unwrap();
    assert_eq!(server.hits(), 2, "the refresh was tried");

    // Past their age, with the key withdrawn: it no longer verifies.
    server.serve(Reply::Jwks(jwks(vec![jwk(
        &ec1(),
        Algorithm::ES256,
        "ec1",
    )])));
    verifier.pretend_fetched(MAX_KEY_AGE).await;
    assert_eq!(refusal(&verifier, &token).await, "unknown_key");
    assert_eq!(server.hits(), 3);
}

#[tokio::test]
async fn an_unavailable_jwks_is_reported_and_not_hammered() {
    let server = JwksServer::start(Reply::Status(500)).await;
    let verifier = server.verifier();
    let token = rs256(&claims(|_| {}));
    assert_eq!(refusal(&verifier, &token).await, "jwks_unavailable");
    assert_eq!(refusal(&verifier, &token).await, "jwks_unavailable");
    assert_eq!(server.hits(), 1, "the failed fetch is not retried at once");

    // Not JSON, not a JWKS, a redirect: each unavailable.
    for reply in [
        Reply::Jwks("<html>".to_string()),
        Reply::Jwks(json!({"keys": "none"}).to_string()),
        Reply::Redirect(server.url()),
    ] {
        server.serve(reply);
        verifier.pretend_fetched(REFETCH_INTERVAL).await;
        assert_eq!(refusal(&verifier, &token).await, "jwks_unavailable");
    }
    assert_eq!(server.hits(), 4, "the redirect was not followed");

    // Once the provider answers, the same verifier works.
    server.serve(Reply::Jwks(usual_jwks()));
    verifier.pretend_fetched(REFETCH_INTERVAL).await;
    verifier.verify(&token).await.unwrap();
}

#[tokio::test]
async fn a_jwks_over_the_size_bound_is_refused() {
    let padding = "x".repeat(MAX_JWKS_BYTES);
    let big =
        json!({"keys": [jwk(&rsa1(), Algorithm::RS256, "rsa1")], "padding": padding}).to_string();
    let token = rs256(&claims(|_| {}));
    for reply in [Reply::Jwks(big.clone()), Reply::Chunked(big.clone())] {
        let server = JwksServer::start(reply).await;
        let verifier = server.verifier();
        let err = verifier.verify(&token).await.unwrap_err();
        assert_eq!(err.code(), "jwks_unavailable");
        assert!(err.to_string().contains("more than"), "{err}");
    }
    // Just under the bound, chunked, it is read whole.
    let fits = json!({"keys": [jwk(&rsa1(), Algorithm::RS256, "rsa1")], "padding": ""});
    let room = MAX_JWKS_BYTES - fits.to_string().len();
    let fits =
        json!({"keys": [jwk(&rsa1(), Algorithm::RS256, "rsa1")], "padding": "x".repeat(room)});
    let server = JwksServer::start(Reply::Chunked(fits.to_string())).await;
    server.verifier().verify(&token).await.unwrap();
}

#[tokio::test]
async fn unusable_keys_are_skipped_not_trusted() {
    let ed_x = |bytes: usize| URL_SAFE_NO_PAD.encode(vec![7u8; bytes]);
    let short_rsa = json!({"kty": "RSA", "kid": "rsa-1024", "n": URL_SAFE_NO_PAD.encode([0xc5u8; 128]), "e": "AQAB"});
    let mut encryption = jwk(&ec1(), Algorithm::ES256, "ec-enc");
    encryption["use"] = json!("enc");
    let mut mislabelled = jwk(&rsa2(), Algorithm::RS256, "rsa2");
    mislabelled["alg"] = json!("PS256");
    let server = JwksServer::start(Reply::Jwks(jwks(vec![
        json!({"kty": "OKP", "crv": "Ed25519", "kid": "ed-short", "x": ed_x(16)}),
        json!({"kty": "OKP", "crv": "Ed448", "kid": "ed448", "x": ed_x(57)}),
        json!({"kty": "EC", "crv": "P-384", "kid": "p384", "x": ed_x(48), "y": ed_x(48)}),
        json!({"kty": "RSA", "kid": "broken"}),
        json!("not even an object"),
        short_rsa,
        encryption,
        mislabelled,
        jwk(&rsa1(), Algorithm::RS256, "rsa1"),
    ])))
    .await;
    let verifier = server.verifier();
    let claims = claims(|_| {});
    for (alg, kid, key) in [
        (Algorithm::EdDSA, "ed-short", ed1()),
        (Algorithm::EdDSA, "ed448", ed1()),
        (Algorithm::ES256, "p384", ec1()),
        (Algorithm::RS256, "broken", rsa1()),
        (Algorithm::RS256, "rsa-1024", rsa1()),
        (Algorithm::ES256, "ec-enc", ec1()),
        (Algorithm::RS256, "rsa2", rsa2()),
    ] {
        let token = sign(alg, kid, &key, &claims);
        assert_eq!(refusal(&verifier, &token).await, "unknown_key", "{kid}");
    }
    // The one good key among them works.
    verifier.verify(&rs256(&claims)).await.unwrap();
}

#[tokio::test]
async fn the_url_must_be_https_and_public_unless_insecure_is_allowed() {
    for url in [
        "http://id.example.com/jwks",
        "ftp://id.example.com/jwks",
        "file:///etc/jwks.json",
        "https://user:secret@id.example.com/jwks",
        "https://127.0.0.1/jwks",
        "https://127.1.2.3:8443/jwks",
        "https://0x7f.1/jwks",
        "https://10.0.0.1/jwks",
        "https://172.16.5.4/jwks",
        "https://192.168.1.1/jwks",
        "https://169.254.169.254/latest/meta-data",
        "https://100.64.0.1/jwks",
        "https://0.0.0.0/jwks",
        "https://[::1]/jwks",
        "https://[fd00::1]/jwks",
        "https://[fe80::1]/jwks",
        "https://[::ffff:127.0.0.1]/jwks",
        "not a url",
    ] {
        match JwksVerifier::new(config(url), false) {
            Ok(_) => panic!("{url} accepted"),
            Err(err) => assert_eq!(err.code(), "invalid_jwks_url", "{url}: {err}"),
        }
    }
    assert!(
        JwksVerifier::new(
            config("https://id.example.com/.well-known/jwks.json"),
            false
        )
        .is_ok()
    );
    assert!(JwksVerifier::new(config("https://8.8.8.8/jwks"), false).is_ok());
    // With --allow-insecure-jwks: http and private addresses, not other schemes.
    assert!(JwksVerifier::new(config("http://10.0.0.1/jwks"), true).is_ok());
    assert!(JwksVerifier::new(config("ftp://id.example.com/jwks"), true).is_err());
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_not_fetched() {
    let server = JwksServer::start(Reply::Jwks(usual_jwks())).await;
    let url = format!("https://localhost:{}/jwks", server.addr.port());
    let verifier = JwksVerifier::new(config(&url), false).unwrap();
    let err = verifier.verify(&rs256(&claims(|_| {}))).await.unwrap_err();
    assert_eq!(err.code(), "jwks_unavailable");
    assert!(err.to_string().contains("loopback"), "{err}");
    assert_eq!(
        server.connections.load(Ordering::SeqCst),
        0,
        "nothing connected to the server"
    );
}

#[tokio::test]
async fn a_provider_that_never_answers_is_given_up() {
    // Accepts connections and never writes a byte.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            open.push(tcp);
        }
    });
    let verifier = JwksVerifier::new(config(&url), true).unwrap();
    let err = verifier.verify(&rs256(&claims(|_| {}))).await.unwrap_err();
    assert_eq!(err.code(), "jwks_unavailable", "{err}");
    held.abort();
}
