//! Thin wrappers over crate-internal items, for the benchmarks in
//! `host/benches/` only (they are outside the crate and see only `pub`
//! items). Not a stable API: hidden from the docs, free to change or go.
//!
//! The functions call the server's own code (the SSE frame, the runtime's
//! engine and linker); only `instantiate_and_describe` repeats the few lines
//! of `Store` setup that `runtime::compile::prepare` and `runtime::turn` do.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::Component;

use crate::runtime::limits::{DESCRIBE_DEADLINE, DESCRIBE_FUEL, DESCRIBE_MEMORY};
use crate::runtime::outbound::OutboundPolicy;
use crate::runtime::{AgentPre, InstanceData, Runtime, TurnSettings, apply_limits};
use crate::secrets::{MasterKey, Vault};
use crate::store::{Db, Writer};

/// The SSE event `GET /sessions/{id}/events` sends for an event
/// (`api::events::frame`; axum writes the frame's bytes as the event is
/// built, so this is the encoding itself), and its bytes as they leave in
/// the response body (`api::events::frame_bytes`). Re-exported: only the
/// API layer names the HTTP types.
pub use crate::api::events::{frame as sse_frame, frame_bytes as sse_frame_bytes};

/// A `Runtime` as the server makes it (so its engine comes from
/// `runtime::compile::engine`, with its epoch ticker running), over a
/// fresh store in `data_dir`, default limits and outbound policy, no secrets.
pub fn runtime(data_dir: &Path) -> anyhow::Result<Arc<Runtime>> {
    let store = Db::open(&data_dir.join("agenthost.redb"))?;
    let writer = Writer::spawn(store.clone())?;
    let master = MasterKey::load(Some(&"42".repeat(32)), data_dir)?;
    Runtime::new(
        data_dir.to_path_buf(),
        store,
        writer,
        Arc::new(Vault::new(&master)),
        TurnSettings::default(),
        OutboundPolicy::default(),
        None,
    )
}

/// A component compiled by the runtime's engine, with its `InstancePre`
/// made by the runtime's linker: what a deployment's cache entry holds.
pub struct GuestPre {
    pre: AgentPre<InstanceData>,
}

/// Compiles `wasm` with `runtime`'s engine and pre-instantiates it with its
/// linker (what `Runtime` does on a deployment's first use).
pub fn instance_pre(runtime: &Runtime, wasm: &[u8]) -> anyhow::Result<GuestPre> {
    let wasm_err = |e: wasmtime::Error| anyhow::anyhow!("{e:#}");
    let component = Component::new(runtime.engine(), wasm).map_err(wasm_err)?;
    let pre = runtime
        .linker()
        .instantiate_pre(&component)
        .and_then(AgentPre::new)
        .map_err(wasm_err)?;
    Ok(GuestPre { pre })
}

/// Instantiates `pre` in a fresh `Store` set up as a turn's (memory
/// limiter, fuel, epoch deadline with a yield every tick) and calls
/// `describe`; returns how many routes it lists.
pub async fn instantiate_and_describe(runtime: &Runtime, pre: &GuestPre) -> anyhow::Result<usize> {
    let wasm_err = |e: wasmtime::Error| anyhow::anyhow!("{e:#}");
    let mut store = wasmtime::Store::new(
        runtime.engine(),
        InstanceData::new(&[("SERVICE_MANIFEST", "1")], DESCRIBE_MEMORY),
    );
    apply_limits(&mut store, DESCRIBE_FUEL, DESCRIBE_DEADLINE, Instant::now()).map_err(wasm_err)?;
    let agent = pre
        .pre
        .instantiate_async(&mut store)
        .await
        .map_err(wasm_err)?;
    let description = agent
        .agenthost_agent_guest()
        .call_describe(&mut store)
        .await
        .map_err(wasm_err)?;
    Ok(description.routes.len())
}

/// Instantiates `pre` in a fresh `Store` (under a turn's limits)
/// and drops both: the per-turn cost the `agenthost_turn_instantiate_seconds`
/// metric measures, plus the teardown it does not.
pub async fn instantiate(runtime: &Runtime, pre: &GuestPre) -> anyhow::Result<()> {
    let wasm_err = |e: wasmtime::Error| anyhow::anyhow!("{e:#}");
    let mut store = wasmtime::Store::new(
        runtime.engine(),
        InstanceData::new(&[("SERVICE_MANIFEST", "1")], DESCRIBE_MEMORY),
    );
    apply_limits(&mut store, DESCRIBE_FUEL, DESCRIBE_DEADLINE, Instant::now()).map_err(wasm_err)?;
    pre.pre
        .instantiate_async(&mut store)
        .await
        .map_err(wasm_err)?;
    Ok(())
}
