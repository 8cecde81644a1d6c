//! `POST /mcp`: agenthost as an MCP server over Streamable HTTP
//! (docs/mcp.md). Each app route is a tool (`tools.rs`); calling one runs a
//! turn (`call.rs`). Stateless: no `Mcp-Session-Id` is handed out, so
//! nothing is held between requests; a conversation goes on by the tool's
//! `session_id` argument, an agenthost session.
//!
//! Authenticated as every other endpoint (its row's access is `Session`),
//! rate-limited per key, its SSE answers under the stream caps, its body
//! under the JSON body limit; the `Origin` check (`origin`) runs before
//! all of them.

mod call;
mod rpc;
mod tools;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use utoipa::openapi::{RefOr, Schema};

use super::caller::Caller;
use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::keys::Principal;
use rpc::Message;

/// The MCP revisions served, newest first. The newest (2026-07-28, stateless
/// with `server/discover`) is not yet: the official TypeScript SDK speaks
/// none newer than 2025-11-25, and the Python SDK falls back to it.
pub(super) const PROTOCOL_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// The schema of `POST /mcp`'s body in the OpenAPI document: one JSON-RPC
/// 2.0 request or notification (`rpc::read` also takes a response, which
/// it answers with 202).
pub(super) fn message_schema(_: &mut super::openapi::Schemas) -> RefOr<Schema> {
    use utoipa::openapi::ObjectBuilder;
    use utoipa::openapi::schema::{SchemaType, Type};
    let text = || ObjectBuilder::new().schema_type(Type::String);
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "One JSON-RPC 2.0 request (with an `id`) or notification (without one)",
        ))
        .property("jsonrpc", text().enum_values(Some(["2.0"])))
        .required("jsonrpc")
        .property(
            "id",
            ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::String, Type::Number]))
                .description(Some("A request's id; none in a notification")),
        )
        .property(
            "method",
            text().description(Some(
                "`initialize`, `ping`, `tools/list`, `tools/call`, or a notification's",
            )),
        )
        .required("method")
        .property("params", ObjectBuilder::new().schema_type(Type::Object))
        .into()
}

/// Tools per `tools/list` page.
const PAGE: usize = 100;

/// The endpoint's one handler.
pub(super) async fn post(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|rejection| {
        ApiError::with_status(
            ErrorCode::InvalidBody,
            rejection.status(),
            rejection.body_text(),
        )
    })?;
    if let Some(version) = headers.get("mcp-protocol-version") {
        let known = version
            .to_str()
            .is_ok_and(|v| PROTOCOL_VERSIONS.contains(&v));
        if !known {
            return Err(rpc::refusal(format!(
                "unsupported MCP-Protocol-Version: this server speaks {}",
                PROTOCOL_VERSIONS.join(", ")
            )));
        }
    }
    let (id, method, params) = match rpc::read(&body) {
        Ok(Message::Request { id, method, params }) => (id, method, params),
        Ok(Message::Accepted) => return Ok(StatusCode::ACCEPTED.into_response()),
        Err(refused) => return Err(refused),
    };
    let answer = match method.as_str() {
        "initialize" => rpc::result(&id, initialize(&params)),
        "ping" => rpc::result(&id, json!({})),
        "tools/list" => list(&state, &principal, &id, &params).await?,
        "tools/call" => return call::call(state, Caller(principal), id, params).await,
        other => rpc::error(
            &id,
            rpc::METHOD_NOT_FOUND,
            format!(
                "method `{other}` is not served here: this server offers tools (tools/list, tools/call)"
            ),
        ),
    };
    Ok(rpc::json_response(&answer))
}

/// The `initialize` result: the client's revision when it is one served,
/// else the newest.
fn initialize(params: &Map<String, Value>) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|v| PROTOCOL_VERSIONS.contains(v))
        .unwrap_or(PROTOCOL_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "agenthost", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "Each tool runs a turn of an agent hosted by agenthost. Pass the result's session_id to continue the conversation. A gated tool call of the agent ends the call with outcome approval_pending: a human decides it over agenthost's HTTP API.",
    })
}

/// `tools/list`: the caller's tools, sorted by name, `PAGE` at a time (the
/// cursor is the index of the page's first tool).
async fn list(
    state: &AppState,
    principal: &Principal,
    id: &Value,
    params: &Map<String, Value>,
) -> Result<Value, ApiError> {
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(Value::String(cursor)) => match cursor.parse::<usize>() {
            Ok(start) => start,
            Err(_) => return Ok(rpc::error(id, rpc::INVALID_PARAMS, "unknown cursor")),
        },
        Some(_) => return Ok(rpc::error(id, rpc::INVALID_PARAMS, "unknown cursor")),
    };
    let tools = tools::visible(state, principal).await?;
    let page: Vec<Value> = (tools.iter().skip(start).take(PAGE))
        .map(tools::Tool::listed)
        .collect();
    let mut result = json!({"tools": page});
    if start + PAGE < tools.len() {
        result["nextCursor"] = json!((start + PAGE).to_string());
    }
    Ok(rpc::result(id, result))
}

/// The messages of `/mcp` that are a contract, from fixed samples, for
/// the golden files (`api::golden_tests`).
#[cfg(test)]
pub(super) fn golden_samples() -> Vec<(&'static str, Value)> {
    let tool = tools::Tool {
        name: "ops_ops".into(),
        app_id: uuid::Uuid::nil(),
        slug: "ops".into(),
        route: "/ops".into(),
        description: None,
        input_schema: None,
    };
    let mut init = initialize(&Map::new());
    // The release's version, not the contract's.
    init["serverInfo"]["version"] = json!("<version>");
    let mut samples = vec![("initialize", init), ("tools_list_entry", tool.listed())];
    samples.extend(call::golden_samples());
    samples
}

/// Whether an `Origin` may call `/mcp`: one of the `--cors-origin` list
/// (`*`: any). A request without one (not from a browser) passes.
fn origin_allowed(origins: &[String], origin: Option<&str>) -> bool {
    let Some(origin) = origin else {
        return true;
    };
    origins
        .iter()
        .any(|o| o.trim() == "*" || o.trim() == origin)
}

/// MCP's defence against DNS rebinding: a browser page's request names its
/// `Origin`, and one not allowed gets `403` before anything else is read.
pub(super) async fn origin(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let origin = request.headers().get(header::ORIGIN);
    let text = origin.map(|o| o.to_str().unwrap_or("\u{fffd}"));
    if origin_allowed(&state.cors_origins, text) {
        return next.run(request).await;
    }
    ApiError::new(
        ErrorCode::OriginNotAllowed,
        format!(
            "Origin `{}` may not call this endpoint: allow it with --cors-origin",
            text.unwrap_or_default()
        ),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_origins_pass_and_requests_without_one() {
        let origins = vec!["https://app.example".to_string()];
        assert!(origin_allowed(&origins, None));
        assert!(origin_allowed(&origins, Some("https://app.example")));
        assert!(!origin_allowed(&origins, Some("http://app.example")));
        assert!(!origin_allowed(&origins, Some("https://evil.example")));
        assert!(!origin_allowed(&[], Some("http://127.0.0.1:8080")));
        assert!(origin_allowed(&["*".into()], Some("https://any.example")));
    }

    #[test]
    fn initialize_answers_the_clients_revision_or_the_newest() {
        let asked = |v: &str| {
            let params = json!({"protocolVersion": v}).as_object().cloned().unwrap();
            initialize(&params)["protocolVersion"].clone()
        };
        assert_eq!(asked("2025-06-18"), "2025-06-18");
        assert_eq!(asked("2024-11-05"), PROTOCOL_VERSIONS[0]);
        assert_eq!(asked("2099-01-01"), PROTOCOL_VERSIONS[0]);
    }
}
