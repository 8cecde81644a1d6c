//! The MCP client: JSON-RPC over Streamable HTTP (revision 2025-11-25; a
//! server answering 2025-06-18 or 2025-03-26 is accepted), each request one
//! POST through the turn's outbound access, its answer JSON or SSE, read
//! within `MAX_MCP_RESPONSE_BYTES`. Only what the host needs: `initialize`
//! (then `notifications/initialized`), `tools/list` and `tools/call`.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use wasmtime_wasi_http::{RequestOptions, WasiBody};

use super::{MAX_MCP_RESPONSE_BYTES, McpServer, Session};
use crate::runtime::outbound::{
    BETWEEN_BYTES_TIMEOUT, CONNECT_TIMEOUT, FIRST_BYTE_TIMEOUT, HostRequests,
};

/// The revision the host asks for, and those it accepts in answer.
pub(super) const PROTOCOL_VERSION: &str = "2025-11-25";
const ACCEPTED_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// Why an MCP request failed: the text the model sees (no secrets: the
/// turn's redactor runs over it too).
#[derive(Debug, thiserror::Error)]
pub(super) enum McpError {
    #[error("the host refused the request to MCP server `{server}`: {why}")]
    Refused { server: String, why: String },
    #[error("MCP server `{server}` could not be reached: {why}")]
    Unreachable { server: String, why: String },
    #[error("MCP server `{server}` answered HTTP {status}")]
    Status { server: String, status: u16 },
    #[error("MCP server `{server}` broke the protocol: {why}")]
    Protocol { server: String, why: String },
    #[error("MCP server `{server}` answered with error {code}: {message}")]
    Rpc {
        server: String,
        code: i64,
        message: String,
    },
    #[error("MCP server `{server}` did not answer within {secs} s (its `timeout_secs`)")]
    Timeout { server: String, secs: u64 },
    #[error("{0}")]
    Config(String),
}

/// One server as a turn calls it.
pub(super) struct Client<'a> {
    pub server: &'a McpServer,
    /// The server's URL for this turn (its `{secret:NAME}` placeholders filled).
    pub url: &'a str,
    pub headers: &'a [(String, std::sync::Arc<str>)],
    pub requests: &'a HostRequests,
}

impl Client<'_> {
    fn name(&self) -> String {
        self.server.name.clone()
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.server.settings.timeout_secs())
    }

    /// Runs `method` in the server's session (made first if there is none),
    /// within the server's timeout.
    pub(super) async fn request(
        &self,
        session: &mut Option<Session>,
        method: &str,
        params: Value,
    ) -> Result<Value, McpError> {
        let secs = self.server.settings.timeout_secs();
        let work = async {
            if session.is_none() {
                *session = Some(self.initialize().await?);
            }
            let current = session.clone().unwrap_or_default();
            self.post(Some(&current), method, Some(params), 2).await
        };
        match tokio::time::timeout(self.timeout(), work).await {
            Ok(result) => result,
            Err(_) => Err(McpError::Timeout {
                server: self.name(),
                secs,
            }),
        }
    }

    async fn initialize(&self) -> Result<Session, McpError> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "agenthost", "version": env!("CARGO_PKG_VERSION")},
        });
        let (result, id) = self.exchange(None, "initialize", Some(params), 1).await?;
        let version = (result.get("protocolVersion").and_then(Value::as_str))
            .unwrap_or_default()
            .to_string();
        if !ACCEPTED_VERSIONS.contains(&version.as_str()) {
            return Err(McpError::Protocol {
                server: self.name(),
                why: format!(
                    "it speaks MCP revision {version:?}; the host speaks {}",
                    ACCEPTED_VERSIONS.join(", ")
                ),
            });
        }
        let session = Session { id, version };
        self.exchange(Some(&session), "notifications/initialized", None, 0)
            .await?;
        Ok(session)
    }

    async fn post(
        &self,
        session: Option<&Session>,
        method: &str,
        params: Option<Value>,
        id: u64,
    ) -> Result<Value, McpError> {
        Ok(self.exchange(session, method, params, id).await?.0)
    }

    /// One POST: a request (`id` > 0) and its result, or a notification
    /// (`id` 0, no answer expected). Also returns the session id the answer set.
    async fn exchange(
        &self,
        session: Option<&Session>,
        method: &str,
        params: Option<Value>,
        id: u64,
    ) -> Result<(Value, Option<String>), McpError> {
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        if id > 0 {
            message["id"] = json!(id);
        }
        let uri: http::Uri = self.url.parse().map_err(|_| {
            McpError::Config(format!(
                "MCP server `{}` has no valid url",
                self.server.name
            ))
        })?;
        let mut builder = http::Request::post(uri.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(authority) = uri.authority() {
            builder = builder.header("host", authority.as_str());
        }
        if let Some(session) = session {
            builder = builder.header("mcp-protocol-version", session.version.as_str());
            if let Some(id) = &session.id {
                builder = builder.header("mcp-session-id", id.as_str());
            }
        }
        for (name, value) in self.headers {
            builder = builder.header(name.as_str(), &**value);
        }
        let body: WasiBody = Full::new(Bytes::from(message.to_string()))
            .map_err(|never| match never {})
            .boxed_unsync();
        let request = builder.body(body).map_err(|_| McpError::Protocol {
            server: self.name(),
            why: "a header value is not valid".into(),
        })?;
        let limit = self.timeout();
        let options = RequestOptions {
            connect_timeout: Some(limit.min(CONNECT_TIMEOUT)),
            first_byte_timeout: Some(limit.min(FIRST_BYTE_TIMEOUT)),
            between_bytes_timeout: Some(limit.min(BETWEEN_BYTES_TIMEOUT)),
        };
        let response = self
            .requests
            .send(request, options)
            .await
            .map_err(|err| self.transport_error(err))?;
        let status = response.status();
        let session_id = (response.headers().get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let sse = (response.headers().get("content-type"))
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let body = self.read(response.into_body()).await?;
        if !status.is_success() {
            return Err(McpError::Status {
                server: self.name(),
                status: status.as_u16(),
            });
        }
        if id == 0 {
            return Ok((Value::Null, session_id));
        }
        let answer = if sse {
            find_in_sse(&body, id)
        } else {
            serde_json::from_slice::<Value>(&body).ok()
        };
        let Some(answer) = answer else {
            return Err(McpError::Protocol {
                server: self.name(),
                why: format!("no JSON-RPC answer to `{method}`"),
            });
        };
        if let Some(error) = answer.get("error") {
            return Err(McpError::Rpc {
                server: self.name(),
                code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                message: (error.get("message").and_then(Value::as_str))
                    .unwrap_or("")
                    .chars()
                    .take(1024)
                    .collect(),
            });
        }
        match answer.get("result") {
            Some(result) => Ok((result.clone(), session_id)),
            None => Err(McpError::Protocol {
                server: self.name(),
                why: format!("the answer to `{method}` has no result"),
            }),
        }
    }

    /// Reads a response body to its end, at most `MAX_MCP_RESPONSE_BYTES`.
    async fn read(&self, mut body: WasiBody) -> Result<Vec<u8>, McpError> {
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|err| McpError::Unreachable {
                server: self.name(),
                why: err.to_string(),
            })?;
            if let Some(data) = frame.data_ref() {
                if out.len() + data.len() > MAX_MCP_RESPONSE_BYTES {
                    return Err(McpError::Protocol {
                        server: self.name(),
                        why: format!("an answer is larger than {MAX_MCP_RESPONSE_BYTES} bytes"),
                    });
                }
                out.extend_from_slice(data);
            }
        }
        Ok(out)
    }

    fn transport_error(&self, err: wasmtime_wasi_http::Error) -> McpError {
        use wasmtime_wasi_http::Error as E;
        let server = self.name();
        match err {
            E::HttpRequestDenied => McpError::Refused {
                server,
                why: "its origin is not on the deployment's outbound allowlist, or the turn may make no more requests (see the journal's HTTP_REQUEST_DENIED)".into(),
            },
            E::DestinationIpProhibited => McpError::Refused {
                server,
                why: "it resolves to a private address (the operator's --outbound-allow-private allows those)".into(),
            },
            other => McpError::Unreachable {
                server,
                why: other.to_string(),
            },
        }
    }
}

/// The JSON-RPC message answering request `id` in an SSE body.
fn find_in_sse(body: &[u8], id: u64) -> Option<Value> {
    let text = String::from_utf8_lossy(body).replace("\r\n", "\n");
    for event in text.split("\n\n") {
        let data: Vec<&str> = (event.lines())
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            continue;
        }
        let Ok(message) = serde_json::from_str::<Value>(&data.join("\n")) else {
            continue;
        };
        if message.get("id").and_then(Value::as_u64) == Some(id)
            && (message.get("result").is_some() || message.get("error").is_some())
        {
            return Some(message);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_answer_among_sse_events() {
        let body = b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"x\":1}}\n\n";
        assert_eq!(find_in_sse(body, 2).unwrap()["result"]["x"], 1);
        assert!(find_in_sse(body, 7).is_none());
        assert!(find_in_sse(b"", 1).is_none());
    }
}
