//! Shared fixtures: a realistic `MESSAGE_DELTA`, a store with a running
//! session, and the hello example component.

use std::path::{Path, PathBuf};
use std::process::Command;

use agenthost::{
    AgentDescription, Artifact, BuildOutcome, Db, LimitsRecord, NewDeployment, Writer, WriterHandle,
};
use agenthost::{By, Delta, MessageDelta, NewEvent, StoredEvent, decode_record, encode_record};
use serde_json::json;
use uuid::Uuid;

/// A `MESSAGE_DELTA` shaped like the ones `runtime::turn::host` journals for a
/// streamed word.
pub fn message_delta() -> NewEvent {
    NewEvent::of(&MessageDelta {
        message_id: "msg_019a8f0e7c1e7d3a9b1f2f7c9a0d4e10".into(),
        delta: Delta::Text {
            text: "hello ".into(),
        },
    })
}

/// That event as the writer stores and publishes it.
pub fn stored_delta() -> StoredEvent {
    let (record, _) = encode_record(
        Uuid::now_v7(),
        3,
        Uuid::now_v7(),
        &message_delta(),
        "2026-11-22T10:00:00.123Z",
    );
    decode_record(3, &record).expect("decode the record")
}

/// A fresh directory under cargo's target dir (a real disk, like a data dir).
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("create a temporary directory")
}

/// A store with its writer thread and one session whose turn 1 is running.
pub struct Session {
    pub store: Db,
    pub writer: WriterHandle,
    pub id: Uuid,
    pub turn: u32,
}

impl Session {
    /// Deploys a stand-in app (no component is run) and starts a session.
    pub async fn open(dir: &Path) -> Session {
        let store = Db::open(&dir.join("agenthost.redb")).expect("open the store");
        let writer = Writer::spawn(store.clone()).expect("spawn the writer");
        let deployment = writer
            .create_deployment(NewDeployment {
                app_slug: "bench".into(),
                version: None,
                manifest: String::new(),
                entry: "agent.wasm".into(),
                manifest_gated: Vec::new(),
                approval_policy: Vec::new(),
                secrets: Vec::new(),
                limits: LimitsRecord::default(),
                outbound: Vec::new(),
                end_users: None,
                end_user_approvals: Vec::new(),
                llm_budget: None,
            })
            .await
            .expect("create a deployment");
        let built = BuildOutcome::Succeeded {
            description: AgentDescription {
                routes: vec!["/chat".into()],
                tools: Vec::new(),
            },
            artifact: Artifact {
                component_sha256: String::new(),
                artifact_sha256: String::new(),
                engine: String::new(),
            },
        };
        writer
            .finish_build(deployment.id, built)
            .await
            .expect("finish the build");
        let created = writer
            .create_session(
                "bench".into(),
                "/chat".into(),
                json!("hi"),
                By::host(),
                None,
            )
            .await
            .expect("create a session");
        let (session, ticket) = created.work.expect("a session created now");
        Session {
            store,
            writer,
            id: session.id,
            turn: ticket.turn,
        }
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the host crate sits in the workspace")
        .to_path_buf()
}

/// The hello example component, built first if missing (into the guests'
/// own target dir, as the e2e tests do: building into this cargo's would
/// wait on its lock).
pub fn hello_wasm() -> Vec<u8> {
    let target_dir = workspace().join("target").join("guests");
    let path = target_dir.join("wasm32-wasip2/release/hello.wasm");
    if !path.exists() {
        // A fresh machine may lack the target; rustup makes this a no-op otherwise.
        let _ = Command::new("rustup")
            .args(["target", "add", "wasm32-wasip2"])
            .status();
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "--release", "--target", "wasm32-wasip2", "--quiet"])
            .arg("--manifest-path")
            .arg(workspace().join("examples/hello/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target_dir)
            .status()
            .expect("run cargo for the hello example");
        assert!(status.success(), "building examples/hello failed");
    }
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}
