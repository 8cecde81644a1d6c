//! Calling the chat completions endpoint: the request body, one streamed
//! exchange, the retries on 429, and the provider's errors in words.

use std::time::Duration;

use serde_json::{Value, json};

use super::config::ModelConfig;
use super::conversation::ChatMsg;
use super::error::LlmError;
use super::stream::{Assembler, Completion};
use crate::error::Error;
use crate::http::{self, Request, Response};
use crate::tools::Tool;

/// At most this many requests per model call (the first and its retries).
pub(crate) const MAX_ATTEMPTS: u32 = 5;
/// At most this much waiting between retries, in total, per model call.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The first wait when the provider gives no `Retry-After`; then doubled.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// The JSON body of a streamed chat completions request.
pub(crate) fn request_body(
    config: &ModelConfig,
    messages: &[ChatMsg],
    tools: &[Tool],
    mcp: &[crate::mcp::McpTool],
) -> Value {
    let mut body = json!({
        "model": config.model,
        "messages": messages.iter().map(ChatMsg::to_json).collect::<Vec<_>>(),
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let offered = offered_tools(tools, mcp);
    if !offered.is_empty() {
        body["tools"] = Value::Array(offered);
    }
    body
}

/// The agent's tools and the MCP servers' as OpenAI function tools.
pub(crate) fn offered_tools(tools: &[Tool], mcp: &[crate::mcp::McpTool]) -> Vec<Value> {
    let function = |name: &str, description: &str, parameters: &Value| {
        json!({
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": parameters,
            },
        })
    };
    let own = (tools.iter()).map(|t| function(&t.name, &t.description, &t.parameters));
    let mcp = (mcp.iter()).map(|t| function(&t.name, &t.description, &t.parameters));
    own.chain(mcp).collect()
}

/// Calls the model with `body`, handing each piece of text to `on_text` as
/// it arrives, and retrying (only) on 429 before any text arrived.
pub(crate) fn complete(
    config: &ModelConfig,
    body: &Value,
    on_text: &mut dyn FnMut(&str) -> Result<(), Error>,
) -> Result<Completion, Error> {
    let mut request = Request::post(config.completions_url())
        .header("accept", "text/event-stream")
        .json(body)?;
    if let Some(key) = &config.api_key {
        request = request.header("authorization", format!("Bearer {key}"));
    }
    let mut waited = Duration::ZERO;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut assembler = Assembler::default();
        let response = http::send_events(request.clone(), |event| {
            let text = assembler.feed(&event.data)?;
            if text.is_empty() {
                Ok(())
            } else {
                on_text(&text)
            }
        })?;
        if response.is_success() {
            return finish(assembler, &response);
        }
        let status = response.status();
        let message = provider_message(&response);
        let error = match status {
            401 | 403 => LlmError::KeyRefused { status, message },
            429 => match next_wait(attempt, response.header("retry-after"), waited) {
                Ok(wait) => {
                    std::thread::sleep(wait);
                    waited += wait;
                    continue;
                }
                Err(why) => LlmError::RateLimited {
                    attempts: attempt,
                    message: format!("{message} ({why})"),
                },
            },
            _ => LlmError::Provider { status, message },
        };
        return Err(error.into());
    }
}

/// The completion of a 2xx response; a malformed one that was not even
/// declared as an event stream says what it was instead.
fn finish(assembler: Assembler, response: &Response) -> Result<Completion, Error> {
    assembler.finish().map_err(|e| {
        let kind = content_type(response).unwrap_or_default();
        match e {
            LlmError::MalformedStream(m) if !kind.starts_with("text/event-stream") => {
                LlmError::MalformedStream(format!("{m} (the response's content-type is `{kind}`)"))
            }
            e => e,
        }
        .into()
    })
}

fn content_type(response: &Response) -> Option<String> {
    response
        .header("content-type")
        .map(|kind| kind.trim().to_ascii_lowercase())
}

/// How long to wait before attempt `attempt + 1`, after `waited` so far:
/// the provider's `Retry-After` seconds if it sent them, else 1 s, 2 s, 4 s...
/// `Err` says why not to retry.
pub(crate) fn next_wait(
    attempt: u32,
    retry_after: Option<&str>,
    waited: Duration,
) -> Result<Duration, String> {
    if attempt >= MAX_ATTEMPTS {
        return Err(format!("gave up after {attempt} attempts"));
    }
    let wait = match retry_after.and_then(|v| v.trim().parse::<u64>().ok()) {
        Some(seconds) => Duration::from_secs(seconds),
        None => FIRST_BACKOFF * 2u32.pow(attempt - 1),
    };
    if waited + wait > MAX_BACKOFF {
        return Err(format!(
            "waiting {} s more would exceed the {} s retry budget",
            wait.as_secs(),
            MAX_BACKOFF.as_secs()
        ));
    }
    Ok(wait)
}

/// The provider's own words: `error.message` of an OpenAI-style JSON error
/// body, else the body's text (shortened), else the status alone.
pub(crate) fn provider_message(response: &Response) -> String {
    if let Ok(body) = serde_json::from_slice::<Value>(response.body()) {
        match &body["error"] {
            Value::Object(error) => {
                if let Some(message) = error.get("message").and_then(Value::as_str) {
                    return message.to_owned();
                }
            }
            Value::String(message) => return message.clone(),
            _ => {}
        }
    }
    let text = response.text();
    let text = text.trim();
    if text.is_empty() {
        return "(no message)".into();
    }
    let mut end = text.len().min(500);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if end < text.len() {
        format!("{}…", &text[..end])
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, body: &str) -> Response {
        Response::for_tests(status, vec![], body.as_bytes().to_vec())
    }

    #[test]
    fn the_body_streams_and_lists_the_declared_tools() {
        let config = ModelConfig {
            base_url: "http://x/v1".into(),
            api_key: None,
            model: "m".into(),
        };
        let tools = vec![Tool {
            name: "lookup_order".into(),
            description: "Looks an order up.".into(),
            parameters: json!({"type": "object"}),
            needs_approval: false,
            handler: Box::new(|_, v| Ok(v)),
        }];
        let messages = vec![ChatMsg::System("s".into()), ChatMsg::User("hi".into())];
        let body = request_body(&config, &messages, &tools, &[]);
        assert_eq!(body["model"], "m");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(
            body["messages"][1],
            json!({"role": "user", "content": "hi"})
        );
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {
                "name": "lookup_order", "description": "Looks an order up.",
                "parameters": {"type": "object"}}}])
        );
        assert!(
            request_body(&config, &messages, &[], &[])
                .get("tools")
                .is_none()
        );
    }

    #[test]
    fn retries_back_off_and_stop() {
        let s = Duration::from_secs;
        assert_eq!(next_wait(1, None, s(0)), Ok(s(1)));
        assert_eq!(next_wait(2, None, s(1)), Ok(s(2)));
        assert_eq!(next_wait(4, None, s(7)), Ok(s(8)));
        assert!(
            next_wait(5, None, s(15))
                .unwrap_err()
                .contains("after 5 attempts")
        );
        assert_eq!(next_wait(1, Some("0"), s(0)), Ok(s(0)));
        assert_eq!(next_wait(1, Some(" 7 "), s(0)), Ok(s(7)));
        // An HTTP date is not seconds: the usual backoff.
        assert_eq!(
            next_wait(1, Some("Wed, 21 Oct 2015 07:28:00 GMT"), s(0)),
            Ok(s(1))
        );
        let budget = next_wait(2, Some("45"), s(0)).unwrap_err();
        assert!(budget.contains("30 s retry budget"), "{budget}");
        assert!(next_wait(3, None, s(27)).is_err());
    }

    #[test]
    fn provider_messages_come_from_the_error_body() {
        let json =
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#;
        assert_eq!(
            provider_message(&response(401, json)),
            "Incorrect API key provided"
        );
        assert_eq!(
            provider_message(&response(500, r#"{"error":"boom"}"#)),
            "boom"
        );
        assert_eq!(
            provider_message(&response(502, "Bad Gateway\n")),
            "Bad Gateway"
        );
        assert_eq!(provider_message(&response(503, "")), "(no message)");
        let long = "x".repeat(2000);
        assert_eq!(provider_message(&response(500, &long)).chars().count(), 501);
    }
}
