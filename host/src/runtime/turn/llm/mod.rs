//! Declared models for agents: the manifest's `[llm.<alias>]` models, which
//! the host (never the guest) calls with their keys, streaming the text
//! straight into the turn's events (docs/llm.md).
//!
//! A deployment's aliases are read from its stored manifest once, when it
//! is loaded (`LlmModels::configure`); each turn resolves their keys
//! (`LlmModels::prepare`, whose values the turn's redactor also replaces)
//! into its `LlmTurn`. Every request goes through the turn's outbound
//! access (`outbound/`: the allowlist, the address check, the bounds and
//! the HTTP_REQUEST / HTTP_RESPONSE records). The import itself, with its
//! LLM_CALL / LLM_RESULT records and the failover, is `turn/llm_calls.rs`;
//! the wire formats are `wire.rs`.

pub(crate) mod settings;
pub(super) mod wire;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use wasmtime_wasi_http::{RequestOptions, WasiBody};

use crate::runtime::outbound::{
    BETWEEN_BYTES_TIMEOUT, CONNECT_TIMEOUT, FIRST_BYTE_TIMEOUT, HostRequests,
};
use crate::secrets::Vault;
use crate::store::Budget;
use settings::{LlmSettings, Provider};

/// Largest error body read from a provider (the rest is left).
const MAX_ERROR_BODY: usize = 16 << 10;
/// Anthropic's API version header.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A deployment's aliases, read once from its stored manifest when it is
/// loaded (checked at upload; one that no longer parses declares none).
#[derive(Clone, Default)]
pub(super) struct LlmModels(Arc<BTreeMap<String, LlmSettings>>, Option<Budget>);

impl LlmModels {
    pub(super) fn configure(manifest: &str) -> LlmModels {
        let section = settings::read(manifest);
        LlmModels(Arc::new(section.aliases), section.budget_per_session)
    }

    /// A turn's models, their keys read from `vault` now; their values are
    /// returned too, for the turn's redactor. A missing key fails only the
    /// calls of its alias.
    pub(super) fn prepare(&self, vault: &Vault, app: &str) -> (LlmTurn, Vec<(String, Arc<str>)>) {
        let mut values = Vec::new();
        let mut keys = HashMap::new();
        for (alias, settings) in self.0.iter() {
            if let Some(key) = &settings.api_key {
                let value = vault.get(&key.secret).ok_or_else(|| {
                    format!(
                        "model `{alias}` needs secret `{}`, which does not exist: set it with PUT /secrets/{}",
                        key.secret, key.secret
                    )
                });
                if let Ok(value) = &value {
                    values.push((key.secret.clone(), value.clone()));
                }
                keys.insert(alias.clone(), value);
            }
        }
        let turn = LlmTurn {
            models: self.0.clone(),
            keys,
            next: 0,
            budget: self.1,
            app: app.to_string(),
        };
        (turn, values)
    }
}

/// A turn's models and their keys.
#[derive(Default)]
pub(super) struct LlmTurn {
    models: Arc<BTreeMap<String, LlmSettings>>,
    keys: HashMap<String, Result<Arc<str>, String>>,
    /// Requests made so far (for `llm_<turn>_<n>` ids).
    next: u32,
    /// The manifest's `[llm] budget_per_session`.
    budget: Option<Budget>,
    /// The app's slug (the metrics' `app` label).
    app: String,
}

/// Why one request failed, and whether the next alias may be tried.
pub(super) struct Failed {
    pub why: String,
    /// Nothing of the answer was taken yet and the failure is one that
    /// failover covers (connection, 429, 5xx, a stream cut before its first token).
    pub may_fail_over: bool,
}

impl LlmTurn {
    /// The declared aliases, in name order.
    pub(super) fn aliases(&self) -> Vec<String> {
        self.models.keys().cloned().collect()
    }

    /// `alias` then its `fallbacks`, in order; none when it is not declared.
    pub(super) fn chain(&self, alias: &str) -> Option<Vec<String>> {
        let settings = self.models.get(alias)?;
        let mut chain = vec![alias.to_string()];
        chain.extend(settings.fallbacks.iter().cloned());
        Some(chain)
    }

    /// The manifest's `[llm] budget_per_session` (a session's own, set
    /// through the API, overrides it in the writer).
    pub(super) fn budget(&self) -> Option<Budget> {
        self.budget
    }

    /// Counts a completion's tokens (`agenthost_llm_tokens_total`).
    pub(super) fn count_tokens(&self, alias: &str, input: u64, output: u64) {
        let metrics = crate::metrics::get();
        for (kind, n) in [("input", input), ("output", output)] {
            let labels = vec![
                ("app", self.app.clone()),
                ("alias", alias.to_string()),
                ("kind", kind.to_string()),
            ];
            metrics.llm_tokens.get_or_create(&labels).inc_by(n);
        }
    }

    /// Counts a call refused at a budget (`agenthost_llm_budget_reached_total`).
    pub(super) fn count_budget_reached(&self, scope: &str) {
        let labels = vec![("app", self.app.clone()), ("scope", scope.to_string())];
        (crate::metrics::get().llm_budget_reached)
            .get_or_create(&labels)
            .inc();
    }

    pub(super) fn settings(&self, alias: &str) -> Option<&LlmSettings> {
        self.models.get(alias)
    }

    /// The next call id of turn `turn`.
    pub(super) fn next_call_id(&mut self, turn: u32) -> String {
        self.next += 1;
        format!("llm_{turn}_{}", self.next)
    }

    /// Posts `body` to `alias`'s endpoint: its response when it is 2xx,
    /// else why not.
    pub(super) async fn send(
        &self,
        alias: &str,
        body: &Value,
        requests: &HostRequests,
    ) -> Result<http::Response<WasiBody>, Failed> {
        let fail = |why: String, may_fail_over: bool| Failed { why, may_fail_over };
        let Some(settings) = self.models.get(alias) else {
            return Err(fail(format!("no model `{alias}` is declared"), false));
        };
        let key = match self.keys.get(alias) {
            Some(Ok(key)) => Some(key.clone()),
            Some(Err(why)) => return Err(fail(why.clone(), true)),
            None => None,
        };
        let uri: http::Uri = (settings.url().parse())
            .map_err(|_| fail(format!("model `{alias}` has no valid base_url"), true))?;
        let mut builder = http::Request::post(uri.clone())
            .header("content-type", "application/json")
            .header("accept", "text/event-stream");
        if let Some(authority) = uri.authority() {
            builder = builder.header("host", authority.as_str());
        }
        match (settings.provider, key) {
            (Provider::Openai, Some(key)) => {
                builder = builder.header("authorization", format!("Bearer {key}"));
            }
            (Provider::Anthropic, key) => {
                builder = builder.header("anthropic-version", ANTHROPIC_VERSION);
                if let Some(key) = key {
                    builder = builder.header("x-api-key", &*key);
                }
            }
            (Provider::Openai, None) => {}
        }
        let body: WasiBody = Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed_unsync();
        let request = (builder.body(body)).map_err(|_| {
            fail(
                format!("model `{alias}`: the key is not a valid header value"),
                false,
            )
        })?;
        let options = RequestOptions {
            connect_timeout: Some(CONNECT_TIMEOUT),
            first_byte_timeout: Some(FIRST_BYTE_TIMEOUT),
            between_bytes_timeout: Some(BETWEEN_BYTES_TIMEOUT),
        };
        let response = match requests.send(request, options).await {
            Ok(response) => response,
            Err(err) => {
                use wasmtime_wasi_http::Error as E;
                let refused = matches!(err, E::HttpRequestDenied | E::DestinationIpProhibited);
                let why = if refused {
                    format!("the host refused the request to model `{alias}` (outbound policy)")
                } else {
                    format!("model `{alias}` could not be reached: {err}")
                };
                return Err(fail(why, !refused));
            }
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let text = read_some(response.into_body(), MAX_ERROR_BODY).await;
        let message = provider_message(&text);
        let retry = status.as_u16() == 429 || status.is_server_error();
        Err(fail(
            format!(
                "model `{alias}` answered HTTP {}: {message}",
                status.as_u16()
            ),
            retry,
        ))
    }
}

/// At most `max` bytes of a body, as text.
async fn read_some(mut body: WasiBody, max: usize) -> String {
    let mut out = Vec::new();
    while out.len() < max
        && let Some(Ok(frame)) = body.frame().await
    {
        if let Some(data) = frame.data_ref() {
            out.extend_from_slice(&data[..data.len().min(max - out.len())]);
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The provider's words from an error body (`error.message`), else its text, shortened.
fn provider_message(text: &str) -> String {
    if let Ok(body) = serde_json::from_str::<Value>(text)
        && let Some(message) = (body.pointer("/error/message").and_then(Value::as_str))
            .or_else(|| body.get("error").and_then(Value::as_str))
    {
        return message.chars().take(500).collect();
    }
    let text = text.trim();
    if text.is_empty() {
        "(no message)".into()
    } else {
        text.chars().take(500).collect()
    }
}
