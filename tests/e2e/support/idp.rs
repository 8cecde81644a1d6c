//! A local identity provider for end-user JWTs: tests/end-users/idp.py
//! (PyJWT, found through `AGENTHOST_TEST_IDP_PYTHON`) signs tokens with
//! RS256 and ES256 keys and serves their JWKS over HTTP; and an app
//! deployed to take its tokens.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::{Server, bundle};

/// The issuer every token of the provider names.
pub const ISSUER: &str = "https://idp.example.test/";

/// The local identity provider, killed when dropped.
pub struct Idp {
    child: Child,
    pub url: String,
    client: reqwest::Client,
}

impl Drop for Idp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Idp {
    pub fn start() -> Idp {
        let python = std::env::var_os("AGENTHOST_TEST_IDP_PYTHON").unwrap_or_else(|| {
            panic!(
                "AGENTHOST_TEST_IDP_PYTHON is not set: the end-user JWT tests sign with PyJWT \
                 (run scripts/test, or `source scripts/prereqs/55-idp.sh`)"
            )
        });
        let script = super::workspace().join("tests/end-users/idp.py");
        let mut child = Command::new(python)
            .arg(script)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the identity provider");
        let mut port = String::new();
        let stdout = child.stdout.take().expect("stdout");
        BufReader::new(stdout)
            .read_line(&mut port)
            .expect("its port");
        Idp {
            child,
            url: format!("http://127.0.0.1:{}", port.trim()),
            client: super::client(),
        }
    }

    /// A token signed with `kid` by `alg`, carrying `claims`.
    pub async fn sign(&self, kid: &str, alg: &str, claims: Value) -> String {
        let body = json!({"kid": kid, "alg": alg, "claims": claims});
        let response = self
            .client
            .post(format!("{}/sign", self.url))
            .json(&body)
            .send();
        response.await.unwrap().text().await.unwrap()
    }

    /// A valid RS256 token for `aud` naming user `sub`.
    pub async fn token(&self, sub: &str, aud: &str) -> String {
        self.sign("rsa1", "RS256", claims(sub, aud)).await
    }

    pub async fn post(&self, path: &str) {
        let response = self.client.post(format!("{}{path}", self.url)).send().await;
        assert_eq!(response.unwrap().status(), 200);
    }

    /// Deploys `examples/hello` as `slug`, taking this provider's tokens for
    /// `audience` (and only those: `required = true`).
    pub async fn deploy_hello(&self, server: &Server, slug: &str, audience: &str) {
        let manifest = format!(
            "[app]\nslug = \"{slug}\"\n[agent]\nentry = \"agent.wasm\"\n[end_users]\nrequired = true\n\
             claims = [\"email\"]\njwks_url = \"{}/jwks\"\nissuer = \"{ISSUER}\"\naudience = \"{audience}\"\n",
            self.url
        );
        let component = super::guest("hello");
        let (status, row) = server
            .upload(bundle(&[("agent.wasm", &component)]), &manifest)
            .await;
        assert_eq!(status, 202, "{row}");
        assert_eq!(server.wait_built(&row).await["status"], "active");
    }
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Claims of a valid token for `aud` naming user `sub`.
pub fn claims(sub: &str, aud: &str) -> Value {
    json!({
        "iss": ISSUER, "aud": aud, "sub": sub, "exp": now() + 600, "iat": now(),
        "email": format!("{sub}@example.com"), "role": "admin",
    })
}
