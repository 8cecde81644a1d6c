//! JSON-RPC 2.0 as MCP's Streamable HTTP transport carries it: one message
//! per POST body, read into a `Message`; answers as one JSON object or as
//! SSE frames (`frame`).

use axum::http::header;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::api::ApiError;
use crate::api::ErrorCode;

/// JSON-RPC's error codes that MCP uses in answers (a message that is not
/// JSON-RPC at all is refused with `400`).
pub(super) const METHOD_NOT_FOUND: i64 = -32601;
pub(super) const INVALID_PARAMS: i64 = -32602;

/// One message a client POSTed.
#[derive(Debug)]
pub(super) enum Message {
    /// A request: it gets an answer.
    Request {
        id: Value,
        method: String,
        params: Map<String, Value>,
    },
    /// A notification, or a response to a request of ours (we send none):
    /// accepted with 202 and no body.
    Accepted,
}

/// Reads a POST body; a refusal is the HTTP answer to send.
pub(super) fn read(body: &[u8]) -> Result<Message, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|err| refusal(format!("the body is not JSON: {err}")))?;
    let Value::Object(mut fields) = value else {
        return Err(refusal(
            "the body must be one JSON-RPC message (an object): batches are not accepted",
        ));
    };
    if fields.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(refusal("`jsonrpc` must be \"2.0\""));
    }
    let id = fields.remove("id");
    // Left out, or an object (JSON-RPC allows an array; MCP never sends one).
    let params = match fields.remove("params") {
        None => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => return Err(refusal("`params` must be an object")),
    };
    match (fields.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) if id.is_string() || id.is_number() => {
            Ok(Message::Request { id, method, params })
        }
        (Some(Value::String(_)), None) => Ok(Message::Accepted),
        (None, Some(_)) if fields.contains_key("result") || fields.contains_key("error") => {
            Ok(Message::Accepted)
        }
        _ => Err(refusal("not a JSON-RPC request, notification or response")),
    }
}

/// A successful answer to request `id`.
pub(super) fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error answer to request `id`.
pub(super) fn error(id: &Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// A notification of ours (progress).
pub(super) fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// A JSON answer (`200 application/json`).
pub(super) fn json_response(message: &Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        message.to_string(),
    )
        .into_response()
}

/// A message as one SSE frame.
pub(super) fn frame(message: &Value) -> Event {
    Event::default().data(message.to_string())
}

/// A message refused before it was read as a request: `400` with the
/// API's error body (the transport allows any body).
pub(super) fn refusal(message: impl Into<String>) -> ApiError {
    ApiError::with_status(
        ErrorCode::InvalidBody,
        axum::http::StatusCode::BAD_REQUEST,
        message,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        let request = br#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"1"}}"#;
        match read(request) {
            Ok(Message::Request { id, method, params }) => {
                assert_eq!((id, method.as_str()), (json!(7), "tools/list"));
                assert_eq!(params["cursor"], "1");
            }
            other => panic!("{other:?}"),
        }
        let notification = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert!(matches!(read(notification), Ok(Message::Accepted)));
        let response = br#"{"jsonrpc":"2.0","id":"a","result":{}}"#;
        assert!(matches!(read(response), Ok(Message::Accepted)));
        for bad in [
            &b"not json"[..],
            br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":null}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/x","params":7}"#,
            br#"{"jsonrpc":"2.0","id":1}"#,
        ] {
            let refused = read(bad).expect_err("refused");
            assert_eq!(refused.status, axum::http::StatusCode::BAD_REQUEST);
        }
    }
}
