//! `journal/append_batch/N`: the time from handing the writer one append of
//! N `MESSAGE_DELTA` events (`WriterHandle::append`, as a turn's host import
//! does) to its acknowledgement, which comes after the batch's transaction
//! committed with `Durability::Immediate` (fsync) into a real redb file.
//! One command per iteration, so one transaction per batch; the events
//! themselves are cloned outside the timing. Throughput is in events.
//!
//! The session's journal grows as the benchmark runs (hundreds of thousands
//! of events for N = 1024), so later batches land in a larger B-tree, as in
//! a long-lived server.

use std::sync::Arc;

use agenthost::Outbox;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};

use crate::support::{Session, message_delta, temp_dir};

pub fn append_batch(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("start a tokio runtime");
    let dir = temp_dir();
    let session = rt.block_on(Session::open(dir.path()));
    // The turn's outbox; each iteration waits for its ack, so nothing coalesces.
    let outbox = Arc::new(Outbox::new(session.id, session.turn));
    // One append outside the timing, so the check below holds even when a
    // filter skips every benchmark of this group.
    rt.block_on(async {
        let ack = session.writer.append(&outbox, vec![message_delta()]);
        ack.await
            .expect("queue the append")
            .await
            .expect("the writer answers")
            .expect("the append commits");
    });
    let mut group = c.benchmark_group("journal");
    for n in [1usize, 64, 1024] {
        let batch = vec![message_delta(); n];
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("append_batch", n), &batch, |b, batch| {
            b.iter_batched(
                || batch.clone(),
                |events| {
                    rt.block_on(async {
                        session
                            .writer
                            .append(&outbox, events)
                            .await
                            .expect("queue the append")
                            .await
                            .expect("the writer answers")
                            .expect("the append commits");
                    })
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
    // The first appended event (after the session's own five) is in redb.
    let id = session.id;
    let first = rt
        .block_on(session.store.read(move |s| s.events(id, 5, 1)))
        .expect("read the journal");
    assert_eq!(
        first.first().map(|e| e.event_type()),
        Some("MESSAGE_DELTA"),
        "the appends reached the journal"
    );
}
