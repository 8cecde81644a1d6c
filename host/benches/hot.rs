//! `cargo bench -p agenthost --bench hot`: the host's hot internals, timed
//! with criterion through the server's own code paths.
//!
//! - `journal/append_batch/{1,64,1024}`: one `WriterHandle::append` of N
//!   `MESSAGE_DELTA` events, from the send to its acknowledgement, through
//!   the real writer thread into a real redb file with durable commits
//!   (one transaction and one fsync per batch). Throughput in events.
//! - `envelope/encode_record`, `envelope/decode_record`: one event's stored
//!   record and envelope JSON, as the writer builds them (the JSON is also
//!   what SSE sends as `data:`), and reading the record back as replay does.
//! - `sse/frame`, `sse/frame_bytes`: the SSE frame of one stored event, as
//!   `GET /sessions/{id}/events` builds it, and its bytes through axum's
//!   `Sse` body.
//! - `instance/instantiate_and_describe`: a fresh `Store` and instance of
//!   the hello example from its cached `InstancePre`, then `describe`, with
//!   the engine and linker of a real `Runtime`.
//!
//! `cargo bench -p agenthost --bench hot -- --test` runs each once as a
//! check. Files go to a temporary directory under cargo's target dir.

// A test or bench crate has no public face: `pub` here means "shared
// between its modules" (`unreachable_pub` is for libraries, root Cargo.toml).
#![allow(unreachable_pub)]

use criterion::{criterion_group, criterion_main};

#[path = "hot/encoding.rs"]
mod encoding;
#[path = "hot/instance.rs"]
mod instance;
#[path = "hot/journal.rs"]
mod journal;
#[path = "hot/support.rs"]
mod support;

criterion_group!(
    benches,
    journal::append_batch,
    encoding::envelope,
    encoding::sse,
    instance::instantiate_and_call
);
criterion_main!(benches);
