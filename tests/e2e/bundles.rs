//! Hostile bundles: gzips of a few MB that unpack to a multi-GiB PAX header,
//! a multi-GiB GNU long name or a million directories each fail their build
//! with a clear error while the server's memory stays bounded; a build that
//! panics fails alone and the builder goes on with the next one.

use std::time::{Duration, Instant};

use flate2::{Compress, Compression, Crc, FlushCompress};
use serde_json::Value;

use crate::support::{self, Server, bundle};

const MANIFEST: &str = "[app]\nslug = \"bombs\"\n[agent]\nentry = \"agent.wasm\"\n";

/// Declared by each oversized header member: 2 GiB.
const HUGE: u64 = 2 << 30;

/// Raw deflate of `data` by a fresh compressor, ending byte-aligned with no
/// reference before its start (a full flush), or as the final block.
fn deflate(data: &[u8], last: bool) -> Vec<u8> {
    let mut compress = Compress::new(Compression::best(), false);
    let mut out = Vec::with_capacity(data.len() / 256 + 1024);
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Full
    };
    loop {
        let consumed = compress.total_in() as usize;
        out.reserve(64 * 1024);
        let status = compress
            .compress_vec(&data[consumed..], &mut out, flush)
            .expect("deflate");
        let all_in = compress.total_in() as usize == data.len();
        // Done: the stream ended, or the flush left room to spare.
        if status == flate2::Status::StreamEnd || (!last && all_in && out.len() < out.capacity()) {
            return out;
        }
    }
}

/// A gzip of `head`, then `repeat` times `chunk`, then `tail`, made without
/// compressing the repeats more than once: a few MB for GiBs of tar.
fn gzip(head: &[u8], chunk: &[u8], repeat: u64, tail: &[u8]) -> Vec<u8> {
    let mut gz = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let mut crc = Crc::new();
    gz.extend(deflate(head, false));
    crc.update(head);
    let (deflated, mut chunk_crc) = (deflate(chunk, false), Crc::new());
    chunk_crc.update(chunk);
    for _ in 0..repeat {
        gz.extend_from_slice(&deflated);
        crc.combine(&chunk_crc);
    }
    gz.extend(deflate(tail, true));
    crc.update(tail);
    gz.extend(crc.sum().to_le_bytes());
    gz.extend(crc.amount().to_le_bytes());
    gz
}

/// A tar header of `kind` named `name` that declares `size` bytes.
fn header(kind: tar::EntryType, name: &str, size: u64) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(0o755);
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.set_cksum();
    header.as_bytes().to_vec()
}

/// A tar of one `agent.wasm`, and the end of the archive.
fn entry_tail() -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut file = tar::Header::new_gnu();
    file.set_size(8);
    file.set_mode(0o644);
    tar.append_data(&mut file, "agent.wasm", &b"\0asm\x01\0\0\0"[..])
        .unwrap();
    tar.into_inner().unwrap()
}

/// A member of `kind` declaring 2 GiB of zeros, then a regular entry.
fn huge_member(kind: tar::EntryType) -> Vec<u8> {
    gzip(
        &header(kind, "././@LongLink", HUGE),
        &vec![0u8; 1 << 20],
        HUGE >> 20,
        &entry_tail(),
    )
}

/// A million directory entries (1024 names, repeated), then a regular entry.
fn million_directories() -> Vec<u8> {
    let chunk: Vec<u8> = (0..1024)
        .flat_map(|i| header(tar::EntryType::Directory, &format!("d{i:04}/"), 0))
        .collect();
    gzip(&[], &chunk, 1_000_000 / 1024, &entry_tail())
}

/// Most the server's memory may grow by across the bombs.
const MAX_GROWTH_KIB: u64 = 256 << 10;

/// A field of the server's `/proc/<pid>/status` in KiB: `VmHWM` (its peak
/// resident memory so far) or `VmRSS` (now).
fn memory_kib(server: &Server, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .expect("read /proc/<pid>/status");
    let line = (status.lines())
        .find(|line| line.split(':').next() == Some(field))
        .expect("the field in /proc/<pid>/status");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Waits for `row`'s build like `Server::wait_built`, but kills the server
/// (and fails) as soon as its memory grows past the bound: a regression
/// must fail here, not take the machine down.
async fn wait_built_bounded(server: &Server, row: &Value, before_kib: u64) -> Value {
    let path = format!("/apps/{}/deployments", row["app_id"].as_str().unwrap());
    let started = Instant::now();
    loop {
        let grown = memory_kib(server, "VmRSS").saturating_sub(before_kib);
        if grown > MAX_GROWTH_KIB {
            server.signal("KILL");
            panic!("the server's RSS grew by {} MiB: killed", grown >> 10);
        }
        let (status, rows) = server.get(&path).await;
        assert_eq!(status, 200, "{rows}");
        let found = (rows.as_array().unwrap().iter())
            .find(|r| r["id"] == row["id"])
            .expect("row listed");
        if found["status"] != "building" {
            return found.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "build never finished"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn bundle_bombs_fail_their_build_with_bounded_memory() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    // One ordinary build first, so that the baseline holds what any build costs.
    let row = server.deploy("warm", &support::guest("hello")).await;
    assert_eq!(row["status"], "active", "{row}");
    // Peak so far: the watchdog compares the current RSS with it.
    let before = memory_kib(&server, "VmHWM");
    let cases = [
        (
            "PAX header",
            huge_member(tar::EntryType::XHeader),
            "PAX extended header member of 2147483648 bytes: at most 65536",
        ),
        (
            "GNU long name",
            huge_member(tar::EntryType::GNULongName),
            "GNU long-name header member of 2147483648 bytes: at most 65536",
        ),
        (
            "a million directories",
            million_directories(),
            "more than 10000 entries (files and directories)",
        ),
    ];
    for (name, gz, needle) in cases {
        assert!(gz.len() < 8 << 20, "{name}: {} bytes", gz.len());
        eprintln!("bundle bombs: {name}: a gzip of {} bytes", gz.len());
        let (status, row) = server.upload(gz, MANIFEST).await;
        assert_eq!(status, 202, "{name}: {row}");
        let row = wait_built_bounded(&server, &row, before).await;
        assert_eq!(row["status"], "failed", "{name}: {row}");
        let error = row["error"].as_str().unwrap();
        assert!(error.contains(needle), "{name}: {error:?} lacks {needle:?}");
    }
    let grown = memory_kib(&server, "VmHWM").saturating_sub(before);
    eprintln!("bundle bombs: the server's peak RSS grew by {} KiB", grown);
    assert!(
        grown < MAX_GROWTH_KIB,
        "the server's peak RSS grew by {} MiB",
        grown >> 10
    );
    // The server still builds.
    let row = server.deploy("after", &support::guest("hello")).await;
    assert_eq!(row["status"], "active", "{row}");
}

#[tokio::test]
async fn a_build_that_panics_fails_and_the_next_one_builds() {
    let dir = support::data_dir();
    let server =
        Server::start_with_env(dir.path(), &[("AGENTHOST_TEST_PANIC_BUILD", "boom.wasm")]).await;
    let hello = support::guest("hello");
    let manifest = "[app]\nslug = \"boom\"\n[agent]\nentry = \"boom.wasm\"\n";
    let (status, row) = server
        .upload(bundle(&[("boom.wasm", &hello)]), manifest)
        .await;
    assert_eq!(status, 202, "{row}");
    let row = server.wait_built(&row).await;
    assert_eq!(row["status"], "failed", "{row}");
    assert!(
        row["error"].as_str().unwrap().contains("internal error"),
        "{row}"
    );
    // The builder thread lives on: the next deployment builds.
    let row = server.deploy("boom", &hello).await;
    assert_eq!(row["status"], "active", "{row}");
    assert_eq!(row["version"], 2, "{row}");
}
