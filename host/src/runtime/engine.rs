//! The one place that builds the wasmtime `Config` and `Engine`, and the epoch ticker.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use wasmtime::{Config, Engine, OptLevel};

/// How often the engine's epoch advances: the granularity of deadlines and
/// of a busy guest yielding to the async runtime.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Builds the engine every component is compiled and run with.
pub fn new_engine() -> wasmtime::Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.cranelift_opt_level(OptLevel::Speed);
    // Deadlines and fair scheduling: guests yield every epoch tick and are
    // interrupted past their deadline (see runtime::turn).
    config.epoch_interruption(true);
    // CPU limits count fuel (about one unit per instruction), not seconds.
    config.consume_fuel(true);
    config.max_wasm_stack(1 << 20);
    Engine::new(&config)
}

/// Starts the thread that advances the engine's epoch; it stops when the
/// engine is dropped everywhere else.
pub fn start_epoch_ticker(engine: &Engine) -> std::io::Result<()> {
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
pub fn fingerprint(engine: &Engine) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}
