//! The bench's HTTP client: the few API calls it makes, each refusing a
//! non-2xx answer with the server's own error message. Answers are read
//! into the few fields the bench uses (`wire.rs`).

use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::wire::{CreatedSession, ErrorBody, SessionView};

use super::metrics::Snapshot;
use super::sse::EventStream;

/// How long a request may take before the run stops (not the event streams:
/// they have their own silence timeout).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The server, its key and a pooled HTTP client.
#[derive(Clone)]
pub(super) struct Api {
    base: String,
    key: String,
    http: reqwest::Client,
}

impl Api {
    pub(super) fn new(url: &str, key: &str) -> anyhow::Result<Api> {
        let http = reqwest::Client::builder()
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .context("cannot create the HTTP client")?;
        Ok(Api {
            base: url.trim_end_matches('/').to_string(),
            key: key.to_string(),
            http,
        })
    }

    pub(super) fn base(&self) -> &str {
        &self.base
    }

    /// `GET path`, its answer read as `T`.
    pub(super) async fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        let request = self.http.get(self.url(path)).timeout(REQUEST_TIMEOUT);
        self.send("GET", path, request).await
    }

    /// `POST path` with a JSON body, its answer read as `T`.
    pub(super) async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> anyhow::Result<T> {
        let request = (self.http.post(self.url(path)))
            .timeout(REQUEST_TIMEOUT)
            .json(body);
        self.send("POST", path, request).await
    }

    /// Creates a session; returns its id.
    pub(super) async fn create_session(
        &self,
        app: &str,
        route: &str,
        input: Value,
    ) -> anyhow::Result<String> {
        let body = json!({"app": app, "route": route, "input": input});
        let created: CreatedSession = self.post("/sessions", &body).await?;
        Ok(created.session_id)
    }

    /// The session's status (`running`, `idle`, ...).
    pub(super) async fn session_status(&self, session: &str) -> anyhow::Result<String> {
        let view: SessionView = self.get(&format!("/sessions/{session}")).await?;
        Ok(view.status)
    }

    /// Opens the session's event stream, after `last_event_id` if given.
    pub(super) async fn events(
        &self,
        session: &str,
        last_event_id: Option<&str>,
    ) -> anyhow::Result<EventStream> {
        let path = format!("/sessions/{session}/events");
        let mut request = self.http.get(self.url(&path)).bearer_auth(&self.key);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        // Only the headers are bounded here: the body is read event by event.
        let response = match tokio::time::timeout(REQUEST_TIMEOUT, request.send()).await {
            Ok(sent) => sent.with_context(|| format!("GET {path}: cannot reach {}", self.base))?,
            Err(_) => bail!(
                "GET {path}: no answer within {} s",
                REQUEST_TIMEOUT.as_secs()
            ),
        };
        if response.status().as_u16() != 200 {
            let status = response.status();
            let body = response.text().await.unwrap_or_default();
            bail!("GET {path} answered {status}: {}", error_message(&body));
        }
        Ok(EventStream::new(response, session))
    }

    /// A scrape of `GET /metrics`, or `None` if the server has no such endpoint.
    pub(super) async fn metrics(&self) -> anyhow::Result<Option<Snapshot>> {
        let response = (self.http.get(self.url("/metrics")))
            .timeout(REQUEST_TIMEOUT)
            .bearer_auth(&self.key)
            .send()
            .await
            .with_context(|| format!("GET /metrics: cannot reach {}", self.base))?;
        let status = response.status();
        if status.as_u16() == 404 {
            return Ok(None);
        }
        let body = response.text().await.context("GET /metrics: no body")?;
        if !status.is_success() {
            bail!("GET /metrics answered {status}: {}", error_message(&body));
        }
        Ok(Some(Snapshot::parse(&body)))
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn send<T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        request: reqwest::RequestBuilder,
    ) -> anyhow::Result<T> {
        let response = (request.bearer_auth(&self.key).send().await)
            .with_context(|| format!("{method} {path}: cannot reach {}", self.base))?;
        let status = response.status();
        let text = (response.text().await)
            .with_context(|| format!("{method} {path}: the answer broke off"))?;
        if !status.is_success() {
            bail!(
                "{method} {path} answered {status}: {}",
                error_message(&text)
            );
        }
        serde_json::from_str(&text).with_context(|| {
            format!(
                "{method} {path}: the answer is not what the API documents: {}",
                short(&text)
            )
        })
    }
}

/// The `error.message` of an error body, else the body itself.
fn error_message(body: &str) -> String {
    match serde_json::from_str::<ErrorBody>(body) {
        Ok(error) => error.error.message,
        Err(_) if body.is_empty() => "(no body)".to_string(),
        Err(_) => short(body),
    }
}

/// At most 300 characters of `text`, for error messages.
fn short(text: &str) -> String {
    text.chars().take(300).collect()
}
