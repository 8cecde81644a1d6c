//! A fake OpenAI-compatible server for the assistant tests: real HTTP on
//! 127.0.0.1, `POST /v1/chat/completions` answered from a script (streamed
//! chunks shaped as OpenAI sends them, an error status, or a hang), and every
//! request it received recorded. It also speaks Anthropic's Messages
//! streaming format on `POST /v1/messages` (`Reply::Anthropic`), and can cut
//! a stream after some chunks (`Reply::Cut`), for the declared models'
//! tests (tests/e2e/llm.rs).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 text/event-stream`: each chunk as a `data:` event (every frame
    /// split in two reads, after a comment line), then `data: [DONE]`.
    Stream(Vec<Value>),
    /// An error status with these headers and an OpenAI-style error body.
    Status {
        status: u16,
        headers: Vec<(&'static str, String)>,
        message: String,
    },
    /// Accepts the request and never answers.
    Hang,
    /// `200 text/event-stream` in Anthropic's format: each event as
    /// `event: <type>` and its `data:` line.
    Anthropic(Vec<Value>),
    /// `200 text/event-stream`: these chunks, then the connection breaks
    /// (no `[DONE]`, the chunked body never ends well).
    Cut(Vec<Value>),
}

impl Reply {
    /// An error status with `{"error":{"message": message, ...}}`.
    pub fn status(status: u16, message: &str) -> Reply {
        Reply::Status {
            status,
            headers: Vec::new(),
            message: message.into(),
        }
    }

    /// 429 with `Retry-After: <seconds>`.
    pub fn rate_limited(retry_after: u64) -> Reply {
        Reply::Status {
            status: 429,
            headers: vec![("retry-after", retry_after.to_string())],
            message: "Rate limit reached for requests".into(),
        }
    }

    /// A streamed text answer, one content delta per part.
    pub fn text(parts: &[&str]) -> Reply {
        let mut chunks = vec![chunk(
            json!({"role": "assistant", "content": "", "refusal": null}),
            None,
        )];
        chunks.extend(parts.iter().map(|p| chunk(json!({"content": p}), None)));
        chunks.push(chunk(json!({}), Some("stop")));
        chunks.push(usage());
        Reply::Stream(chunks)
    }

    /// A streamed answer asking for `calls` (name, arguments JSON text) in
    /// parallel, after `text` if not empty: each call's first fragment has
    /// its id, type and name, and its arguments follow in three pieces.
    pub fn tool_calls(text: &str, calls: &[(&str, &str)]) -> Reply {
        let mut chunks = vec![chunk(json!({"role": "assistant", "content": null}), None)];
        if !text.is_empty() {
            chunks.push(chunk(json!({"content": text}), None));
        }
        for (index, (name, arguments)) in calls.iter().enumerate() {
            chunks.push(chunk(
                json!({"tool_calls": [{"index": index, "id": format!("call_fake{index}"),
                    "type": "function", "function": {"name": name, "arguments": ""}}]}),
                None,
            ));
            let third = arguments.len() / 3;
            let pieces = [
                &arguments[..third],
                &arguments[third..2 * third],
                &arguments[2 * third..],
            ];
            for piece in pieces {
                chunks.push(chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    None,
                ));
            }
        }
        chunks.push(chunk(json!({}), Some("tool_calls")));
        chunks.push(usage());
        Reply::Stream(chunks)
    }
}

impl Reply {
    /// A streamed Anthropic text answer, one `text_delta` per part, with
    /// 11 input and 5 output tokens.
    pub fn anthropic_text(parts: &[&str]) -> Reply {
        let mut events = vec![
            json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message",
                "role": "assistant", "model": "claude-fake", "content": [],
                "stop_reason": null, "usage": {"input_tokens": 11, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            json!({"type": "ping"}),
        ];
        events.extend(parts.iter().map(|p| {
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": p}})
        }));
        events.push(json!({"type": "content_block_stop", "index": 0}));
        events.push(json!({"type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"output_tokens": 5}}));
        events.push(json!({"type": "message_stop"}));
        Reply::Anthropic(events)
    }
}

/// A `chat.completion.chunk` with one choice.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "gpt-test", "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
        "usage": null,
    })
}

/// The last chunk with `stream_options.include_usage`: no choices, the usage.
pub fn usage() -> Value {
    json!({
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "gpt-test", "choices": [],
        "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27},
    })
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub authorization: Option<String>,
    /// Anthropic's `x-api-key`.
    pub api_key: Option<String>,
    pub body: Value,
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    received: Vec<Received>,
}

type Shared = Arc<Mutex<Script>>;

/// The server; stops when dropped.
pub struct FakeOpenAi {
    pub addr: SocketAddr,
    script: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl FakeOpenAi {
    /// Starts on 127.0.0.1 with a free port, answering with `replies` in order
    /// (then 500 once the script is used up).
    pub async fn start(replies: Vec<Reply>) -> FakeOpenAi {
        let script: Shared = Arc::new(Mutex::new(Script {
            replies: replies.into(),
            received: Vec::new(),
        }));
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .route("/v1/messages", post(completions))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake server");
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("fake server");
        });
        FakeOpenAi { addr, script, task }
    }

    /// `http://127.0.0.1:<port>`, as `[outbound] allow` spells it.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The `OPENAI_BASE_URL` to give the agent.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.origin())
    }

    /// Points `server`'s agents at this server: sets the `OPENAI_*`
    /// secrets (the key `sk-fake-test-key`, the model `gpt-fake`) and
    /// returns the manifest lines that declare them and allow its origin.
    pub async fn configure(&self, server: &super::Server) -> String {
        for (name, value) in [
            ("OPENAI_BASE_URL", self.base_url()),
            ("OPENAI_API_KEY", "sk-fake-test-key".to_string()),
            ("OPENAI_MODEL", "gpt-fake".to_string()),
        ] {
            let (status, body) = server.put_secret(name, &value).await;
            assert_eq!(status, 201, "{body}");
        }
        format!(
            "secrets = [\"OPENAI_BASE_URL\", \"OPENAI_API_KEY\", \"OPENAI_MODEL\"]\n\
             [outbound]\nallow = [\"{}\"]\n",
            self.origin()
        )
    }

    /// Adds replies at the end of the script.
    pub fn push(&self, replies: Vec<Reply>) {
        self.script.lock().unwrap().replies.extend(replies);
    }

    /// Every request received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.script.lock().unwrap().received.clone()
    }
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn completions(
    State(script): State<Shared>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let reply = {
        let mut script = script.lock().unwrap();
        let header = |name: &str| {
            (headers.get(name))
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        script.received.push(Received {
            path: uri.path().to_string(),
            api_key: header("x-api-key"),
            authorization: headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body,
        });
        script.replies.pop_front()
    };
    match reply {
        Some(Reply::Stream(chunks)) => stream(chunks),
        Some(Reply::Status {
            status,
            headers,
            message,
        }) => {
            let mut response = (
                StatusCode::from_u16(status).unwrap(),
                [(header::CONTENT_TYPE, "application/json")],
                error_body(&message),
            )
                .into_response();
            for (name, value) in headers {
                response.headers_mut().insert(name, value.parse().unwrap());
            }
            response
        }
        Some(Reply::Hang) => std::future::pending().await,
        Some(Reply::Anthropic(events)) => {
            let frames = (events.iter())
                .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
                .collect();
            sse(frames, false)
        }
        Some(Reply::Cut(chunks)) => {
            let frames = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
            sse(frames, true)
        }
        None => (
            StatusCode::INTERNAL_SERVER_ERROR,
            error_body("the fake server's script is used up"),
        )
            .into_response(),
    }
}

fn error_body(message: &str) -> String {
    json!({"error": {"message": message, "type": "fake_error", "param": null, "code": null}})
        .to_string()
}

/// The chunks as SSE, each frame in two reads, a comment first, `[DONE]` last.
fn stream(chunks: Vec<Value>) -> Response {
    let mut frames: Vec<String> = vec![": OPENROUTER PROCESSING\n\n".into()];
    frames.extend(chunks.iter().map(|c| format!("data: {c}\n\n")));
    frames.push("data: [DONE]\n\n".into());
    sse(frames, false)
}

/// `frames` as an event stream, each in two reads; `cut`: the body then
/// fails (the connection breaks mid-stream).
fn sse(frames: Vec<String>, cut: bool) -> Response {
    let pieces: Vec<Bytes> = frames
        .into_iter()
        .flat_map(|frame| {
            let half = frame.len() / 2;
            [
                Bytes::copy_from_slice(&frame.as_bytes()[..half]),
                Bytes::copy_from_slice(&frame.as_bytes()[half..]),
            ]
        })
        .collect();
    let body = futures::stream::iter(pieces)
        .then(|piece| async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            Ok::<_, std::io::Error>(piece)
        })
        .chain(futures::stream::iter(cut.then_some(())).then(|()| async {
            // What was sent reaches the client before the connection breaks.
            tokio::time::sleep(Duration::from_millis(100)).await;
            Err(std::io::Error::other("the fake cuts the stream"))
        }));
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}
