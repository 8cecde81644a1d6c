//! One event's encodings, with no I/O.
//!
//! - `envelope/new_event`: `NewEvent::of` a `MESSAGE_DELTA`: its payload
//!   serialized, on the thread of the turn that emits it.
//! - `envelope/encode_record`: `journal::encode_record` of that event,
//!   exactly as the writer calls it for every event: the envelope JSON
//!   (what clients receive as SSE `data:`) and the stored record
//!   `[1u8][16-byte id][JSON]` built around it.
//! - `envelope/decode_record`: `journal::decode_record` of that record, as a
//!   replay read does for every event it streams.
//! - `sse/frame`: `api::events::frame` of the stored event: the `id:` and
//!   `data:` lines axum writes into the frame's buffer as it is built.
//! - `sse/frame_bytes`: the same frame through axum's `Sse` response body,
//!   to the bytes sent on the wire (adds the response and body plumbing of
//!   a one-event stream, which a long stream pays only once).
//!
//! Throughput is in events.

use std::hint::black_box;

use agenthost::bench_api;
use agenthost::{decode_record, encode_record};
use criterion::{Criterion, Throughput};
use uuid::Uuid;

use crate::support::{message_delta, stored_delta};

pub fn envelope(c: &mut Criterion) {
    let event = message_delta();
    let (id, session) = (Uuid::now_v7(), Uuid::now_v7());
    let created_at = "2026-11-22T10:00:00.123Z";
    let (record, _) = encode_record(id, 3, session, &event, created_at);

    let mut group = c.benchmark_group("envelope");
    group.throughput(Throughput::Elements(1));
    group.bench_function("new_event", |b| b.iter(message_delta));
    group.bench_function("encode_record", |b| {
        b.iter(|| {
            encode_record(
                black_box(id),
                black_box(3),
                black_box(session),
                black_box(&event),
                black_box(created_at),
            )
        })
    });
    group.bench_function("decode_record", |b| {
        b.iter(|| decode_record(black_box(3), black_box(&record)).expect("decode"))
    });
    group.finish();
}

pub fn sse(c: &mut Criterion) {
    let event = stored_delta();
    // The frame is what the event stream sends: `id: <event id>`, the
    // envelope as `data:`, then a blank line.
    let bytes = bench_api::sse_frame_bytes(&event).expect("frame bytes");
    let expected = format!("id: {}\ndata: {}\n\n", event.id, event.json);
    assert_eq!(&bytes[..], expected.as_bytes());

    let mut group = c.benchmark_group("sse");
    group.throughput(Throughput::Elements(1));
    group.bench_function("frame", |b| {
        b.iter(|| bench_api::sse_frame(black_box(&event)))
    });
    group.bench_function("frame_bytes", |b| {
        b.iter(|| bench_api::sse_frame_bytes(black_box(&event)).expect("frame bytes"))
    });
    group.finish();
}
