//! The one place that builds the wasmtime `Config` and `Engine`, and the epoch ticker.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};

use super::compile_cache::CompileCache;
use crate::runtime::limits::MEMORY_MB;

/// How often the engine's epoch advances: the granularity of deadlines and
/// of a busy guest yielding to the async runtime.
pub(super) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Elements of one table, at most (the pool reserves room for this many in
/// every table slot; the limiter refuses a growth beyond it).
pub(crate) const TABLE_ELEMENTS: usize = 20_000;
/// What one component may hold, at most. Every agent our SDKs build has one
/// linear memory, two tables and at most 14 core instances (a Python agent:
/// its interpreter's modules); a component over any of these is refused at
/// deploy, so no agent takes more than one instance's share of the pool
/// (docs/limits.md).
pub(crate) const MAX_MEMORIES_PER_COMPONENT: u32 = 2;
pub(crate) const MAX_TABLES_PER_COMPONENT: u32 = 8;
pub(crate) const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 24;

/// Builds the engine every component is compiled and run with; `slots` is
/// how many component instances may live at once (one per running turn,
/// plus `describe` at deploy time); `cache`, when given, keeps every
/// function Cranelift compiles, so later compilations reuse them.
pub(super) fn new_engine_with(
    slots: u32,
    cache: Option<Arc<CompileCache>>,
) -> wasmtime::Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.cranelift_opt_level(OptLevel::Speed);
    if let Some(cache) = cache {
        // Function by function: a component that shares code with an earlier
        // one (the same Python runtime under a changed app) compiles only the rest.
        config.enable_incremental_compilation(cache)?;
    }
    // Deadlines and fair scheduling: guests yield every epoch tick and are
    // interrupted past their deadline (see runtime::turn).
    config.epoch_interruption(true);
    // CPU limits count fuel (about one unit per instruction), not seconds.
    config.consume_fuel(true);
    config.max_wasm_stack(1 << 20);
    // A fresh instance per turn is cheap only if instantiation reuses
    // pre-reserved slots with copy-on-write memory images: the pooling
    // allocator. A Rust wasip2 component is a handful of core instances (its
    // module plus wit-component shims), hence the per-slot multiples.
    let slots = slots.max(1);
    let mut pool = PoolingAllocationConfig::new();
    // Each instance's share of the pool is what one component may hold, so
    // every slot can run an instance of any agent at once.
    pool.total_component_instances(slots)
        .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_COMPONENT)
        .total_core_instances(slots.saturating_mul(MAX_CORE_INSTANCES_PER_COMPONENT))
        .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
        .total_memories(slots.saturating_mul(MAX_MEMORIES_PER_COMPONENT))
        .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
        .total_tables(slots.saturating_mul(MAX_TABLES_PER_COMPONENT))
        .table_elements(TABLE_ELEMENTS)
        .total_stacks(slots)
        .max_memory_size((MEMORY_MB.max as usize) << 20)
        // Measured (cargo bench --bench hot -- instance, BENCHMARKS.md):
        // zeroing a reused memory slot by memset costs more than returning
        // its pages and faulting them in again; for tables it is the reverse.
        .linear_memory_keep_resident(0)
        .table_keep_resident(64 << 10);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config)
}

/// A plain engine for work outside the server (`agenthost build` snapshots
/// Python and TypeScript agents with it, `cli::lang`): no pool, no fuel,
/// one instance at a time; epochs, so a build can bound the agent's
/// module-level code (`cli::lang::init_limit`).
pub(crate) fn new_build_engine() -> wasmtime::Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.cranelift_opt_level(OptLevel::Speed);
    config.epoch_interruption(true);
    Engine::new(&config)
}

/// Starts the thread that advances the engine's epoch; it stops when the
/// engine is dropped everywhere else.
pub(super) fn start_epoch_ticker(engine: &Engine) -> std::io::Result<()> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("epoch-ticker".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })?;
    Ok(())
}

/// A fingerprint of everything that makes precompiled artifacts compatible.
/// An artifact made under another fingerprint is recompiled from its component.
pub(crate) fn fingerprint(engine: &Engine) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}
