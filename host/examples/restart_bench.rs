//! Restart time after a crash on a large journal (docs/durability.md, BENCHMARKS.md).
//!
//! `restart_bench write DIR MB [quick-repair]` fills `DIR/agenthost.redb`
//! with journal events through the real writer until the file reaches MB
//! megabytes, then aborts without closing the database (as a crash would).
//! `restart_bench open DIR` times opening it again: redb's repair walk, or
//! almost nothing when the last commit saved the allocator state
//! (`--journal-quick-repair`).

use std::sync::Arc;
use std::time::Instant;

use agenthost::{
    AgentDescription, Artifact, BuildOutcome, Db, NewDeployment, Outbox, RedbOptions, Writer,
};
use agenthost::{By, Delta, MessageDelta, NewEvent};
use serde_json::json;

const SESSIONS: usize = 100;
const BATCH: usize = 2000;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("write") if args.len() == 4 => write(&args[2], args[3].parse()?, false).await,
        Some("write") if args.len() == 5 && args[4] == "quick-repair" => {
            write(&args[2], args[3].parse()?, true).await
        }
        Some("open") if args.len() == 3 => open(&args[2]),
        _ => anyhow::bail!(
            "usage: restart_bench write DIR MB [quick-repair] | restart_bench open DIR"
        ),
    }
}

async fn write(dir: &str, megabytes: u64, quick_repair: bool) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let path = std::path::Path::new(dir).join("agenthost.redb");
    let options = RedbOptions {
        quick_repair,
        ..RedbOptions::default()
    };
    let store = Db::open_with(&path, options)?;
    let writer = Writer::spawn(store.clone())?;
    let deployment = writer
        .create_deployment(NewDeployment {
            app_slug: "bench".into(),
            version: None,
            manifest: String::new(),
            entry: "a.wasm".into(),
            manifest_gated: vec![],
            approval_policy: vec![],
            secrets: vec![],
            limits: Default::default(),
            outbound: Vec::new(),
            end_users: None,
            end_user_approvals: Vec::new(),
            llm_budget: None,
        })
        .await?;
    let outcome = BuildOutcome::Succeeded {
        description: AgentDescription {
            routes: vec!["/chat".into()],
            tools: vec![],
        },
        artifact: Artifact {
            component_sha256: String::new(),
            artifact_sha256: String::new(),
            engine: String::new(),
        },
    };
    writer.finish_build(deployment.id, outcome).await?;
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        let created = writer
            .create_session(
                "bench".into(),
                "/chat".into(),
                json!("go"),
                By::host(),
                None,
            )
            .await?;
        let session = created.answer;
        sessions.push(Arc::new(Outbox::new(session.id, 1)));
    }
    let started = Instant::now();
    let mut events = 0u64;
    let target = megabytes << 20;
    let mut round = 0usize;
    while std::fs::metadata(&path)?.len() < target {
        let mut acks = Vec::new();
        for session in &sessions {
            let batch = (0..BATCH)
                .map(|i| {
                    NewEvent::of(&MessageDelta {
                        message_id: format!("msg_{round}"),
                        delta: Delta::Text {
                            text: format!("word {i} of a reasonably long streamed reply"),
                        },
                    })
                })
                .collect();
            acks.push(writer.append(session, batch).await?);
            events += BATCH as u64;
        }
        for ack in acks {
            ack.await??;
        }
        round += 1;
    }
    let size = std::fs::metadata(&path)?.len();
    println!(
        "wrote {events} events in {:.1} s ({:.0} events/s), file {} MiB; aborting without a clean close",
        started.elapsed().as_secs_f64(),
        events as f64 / started.elapsed().as_secs_f64(),
        size >> 20
    );
    std::process::abort();
}

fn open(dir: &str) -> anyhow::Result<()> {
    let path = std::path::Path::new(dir).join("agenthost.redb");
    let size = std::fs::metadata(&path)?.len();
    let started = Instant::now();
    let store = Db::open(&path)?;
    let opened = started.elapsed();
    let sessions = store.sessions(&agenthost::SessionFilter {
        limit: 1_000,
        ..Default::default()
    })?;
    println!(
        "opened {} MiB in {:.1} ms ({} sessions)",
        size >> 20,
        opened.as_secs_f64() * 1000.0,
        sessions.len()
    );
    Ok(())
}
