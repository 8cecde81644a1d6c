//! A declared model's stream when its host dies (issue 43, docs/llm.md
//! "After a crash"): two hosts on one PostgreSQL database run the Rust
//! `llm-direct` fixture over `[llm.main]`; the provider streams three tokens
//! of the first request and then holds it, and the host serving the turn
//! is killed with SIGKILL. A client that resumes on the other host with
//! `Last-Event-ID` sees every token exactly once and the turn closed
//! `host_restarted` (its message incomplete); the provider received exactly
//! one request per journaled `LLM_CALL`, then and after a later turn.
//!
//! This always runs on PostgreSQL (`scripts/test` skips `cluster_` in its
//! PostgreSQL pass: it ran already).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::support::agents::{deltas, of_type, said};
use crate::support::fake_openai::{chunk, usage};
use crate::support::{self, Server};

/// The model's key (secret `LLM_KEY`).
const KEY: &str = "sk-llm-cluster-7e6d5c4b3a";
/// What the first request streams before the provider holds it.
const TOKENS: [&str; 3] = ["one ", "two ", "three "];

/// A provider in OpenAI's streaming format on 127.0.0.1 that counts the
/// requests it receives: the first streams [`TOKENS`] and then holds the
/// response open (never ending it); any later one answers `after restart`.
struct Provider {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Provider {
    async fn start() -> Provider {
        let requests = Arc::new(AtomicUsize::new(0));
        let counter = requests.clone();
        let app = Router::new().route(
            "/v1/chat/completions",
            post(move |_body: Bytes| {
                let first = counter.fetch_add(1, Ordering::SeqCst) == 0;
                async move { answer(first) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the provider");
        let addr = listener.local_addr().expect("the provider's address");
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("the provider");
        });
        Provider {
            addr,
            requests,
            task,
        }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The first request's held stream, or a whole answer.
fn answer(first: bool) -> Response {
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    let frames: Vec<Value> = if first {
        chunks.extend(TOKENS.iter().map(|t| chunk(json!({"content": t}), None)));
        chunks
    } else {
        chunks.push(chunk(json!({"content": "after restart"}), None));
        chunks.push(chunk(json!({}), Some("stop")));
        chunks.push(usage());
        chunks
    };
    let mut text: Vec<Bytes> = (frames.iter())
        .map(|c| Bytes::from(format!("data: {c}\n\n")))
        .collect();
    if !first {
        text.push(Bytes::from_static(b"data: [DONE]\n\n"));
    }
    let held = first;
    let body = futures::stream::iter(text.into_iter().map(Ok::<_, std::io::Error>)).chain(
        futures::stream::iter(held.then_some(())).then(|()| async {
            // Held open: the host that reads it is killed meanwhile.
            std::future::pending::<()>().await;
            Ok(Bytes::new())
        }),
    );
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(body),
    )
        .into_response()
}

/// A database name of its own for one test's hosts.
fn database(dir: &tempfile::TempDir) -> String {
    let name = dir.path().file_name().unwrap().to_string_lossy();
    let name: String = (name.chars())
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("cluster_llm_{name}")
}

/// The events' seqs, which must run on without a gap or a repeat.
fn seqs(events: &[Value]) -> Vec<u64> {
    events.iter().filter_map(|e| e["seq"].as_u64()).collect()
}

#[tokio::test]
async fn a_declared_models_stream_survives_its_hosts_kill_once_and_is_never_resent() {
    let provider = Provider::start().await;
    let (dir_a, dir_b) = (support::data_dir(), support::data_dir());
    let db = database(&dir_a);
    let flags = ["--outbound-allow-private"];
    let a = Server::start_host_with(dir_a.path(), &db, &flags).await;
    let b = Server::start_host_with(dir_b.path(), &db, &flags).await;
    let (status, body) = a.put_secret("LLM_KEY", KEY).await;
    assert_eq!(status, 201, "{body}");
    let manifest = format!(
        "[app]\nslug = \"llm\"\n[agent]\nentry = \"llm.wasm\"\n\
         [outbound]\nallow = [\"http://{addr}\"]\n\
         [llm.main]\nprovider = \"openai\"\nbase_url = \"http://{addr}/v1\"\n\
         model = \"gpt-fake\"\napi_key = {{ secret = \"LLM_KEY\" }}\n",
        addr = provider.addr
    );
    let component = support::guest("llm-direct");
    a.deploy_files(&[("llm.wasm", &component)], &manifest).await;

    // The turn runs on A (which accepted it); a client watches it there
    // until the model's three tokens are in.
    let session = a.session("llm", "/chat", json!("count")).await;
    let mut on_a = a.events(&session, None).await;
    let mut seen: Vec<Value> = Vec::new();
    while deltas(&seen).len() < 1 + TOKENS.len() {
        let event = (on_a.next(Duration::from_secs(60)).await)
            .unwrap_or_else(|| panic!("the stream on A ended: {seen:#?}"));
        seen.push(event);
    }
    assert_eq!(provider.requests(), 1);
    let last_id = seen.last().unwrap()["id"].as_str().unwrap().to_string();
    a.kill();

    // The client resumes on B after the last event it saw.
    let mut on_b = b.events(&session, Some(&last_id)).await;
    let rest = on_b.until(&["TURN_ERROR", "TURN_ENDED"]).await;
    let error = rest.last().unwrap();
    assert_eq!(error["type"], "TURN_ERROR", "{rest:#?}");
    assert_eq!(error["payload"]["kind"], "host_restarted", "{error}");
    let all: Vec<Value> = seen.iter().chain(rest.iter()).cloned().collect();
    // Every token once, no event twice, none missing.
    assert_eq!(deltas(&all)[1..], TOKENS, "{all:#?}");
    let seqs = seqs(&all);
    let expected: Vec<u64> = (seqs[0]..seqs[0] + seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "{all:#?}");
    let end = (rest.iter())
        .find(|e| e["type"] == "MESSAGE_END" && e["payload"]["role"] == "assistant")
        .expect("the open message closed");
    assert_eq!(end["payload"]["incomplete"], true, "{end}");
    assert_eq!(end["payload"]["text"], TOKENS.concat());

    // The request that may have reached the provider was not sent again.
    let journal = b.events(&session, None).await.until(&["TURN_ERROR"]).await;
    assert_eq!(of_type(&journal, "LLM_CALL").len(), 1, "{journal:#?}");
    assert_eq!(provider.requests(), 1);

    // A later turn is a new LLM_CALL and a new request, on the host that is left.
    let (status, body) = b
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": "again"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let next = on_b.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    assert_eq!(next.last().unwrap()["type"], "TURN_ENDED", "{next:#?}");
    assert_eq!(said(&next), ["after restart"]);
    let journal = b.events(&session, None).await.until(&["TURN_ENDED"]).await;
    assert_eq!(of_type(&journal, "LLM_CALL").len(), 2, "{journal:#?}");
    assert_eq!(provider.requests(), 2);
}
