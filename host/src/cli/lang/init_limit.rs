//! The time limit on an agent's module-level code at build time: a Python
//! or TypeScript build runs it once to take its snapshot, and an endless
//! loop there would otherwise hang `agenthost build`, `deploy` and `dev`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::anyhow;
use wasmtime::Store;

/// Overrides the limit, in seconds.
pub(super) const VAR: &str = "AGENTHOST_BUILD_INIT_SECS";

/// The limit when `AGENTHOST_BUILD_INIT_SECS` is not set.
const DEFAULT_SECS: u64 = 60;

/// The limit of one build.
pub(super) struct Limit {
    limit: Duration,
    fired: Arc<AtomicBool>,
}

/// A store's limit, armed: dropping it disarms it.
pub(super) struct Armed {
    _disarm: mpsc::Sender<()>,
}

impl Limit {
    /// `AGENTHOST_BUILD_INIT_SECS`, else 60 s.
    pub(super) fn from_env() -> anyhow::Result<Limit> {
        let secs = match std::env::var(VAR) {
            Ok(secs) => secs
                .trim()
                .parse()
                .map_err(|_| anyhow!("{VAR} must be a whole number of seconds, not {secs:?}"))?,
            Err(_) => DEFAULT_SECS,
        };
        Ok(Limit::new(Duration::from_secs(secs)))
    }

    /// A limit of `limit`.
    pub(super) fn new(limit: Duration) -> Limit {
        Limit {
            limit,
            fired: Arc::default(),
        }
    }

    /// Arms `store` (of an engine made by `runtime::new_build_engine`,
    /// which has epoch interruption) to trap once the limit has passed: a
    /// thread advances the engine's epoch then, unless the returned guard
    /// is dropped first.
    pub(super) fn arm<T>(&self, store: &mut Store<T>) -> anyhow::Result<Armed> {
        store.set_epoch_deadline(1);
        store.epoch_deadline_trap();
        let engine = store.engine().weak();
        let (disarm, disarmed) = mpsc::channel::<()>();
        let (limit, fired) = (self.limit, self.fired.clone());
        std::thread::Builder::new()
            .name("build-init-limit".into())
            .spawn(move || {
                if disarmed.recv_timeout(limit) == Err(mpsc::RecvTimeoutError::Timeout)
                    && let Some(engine) = engine.upgrade()
                {
                    fired.store(true, Ordering::Relaxed);
                    engine.increment_epoch();
                }
            })?;
        Ok(Armed { _disarm: disarm })
    }

    /// The error to report when the limit ended the agent's code.
    pub(super) fn exceeded(&self) -> Option<anyhow::Error> {
        self.fired.load(Ordering::Relaxed).then(|| {
            anyhow!(
                "the agent's module-level code was still running after {} s, when the \
                 build takes its snapshot (an endless loop?). Code at module level runs \
                 once, at build time; work for a turn belongs in a handler or a tool. \
                 {VAR} sets this limit.",
                self.limit.as_secs()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use wasmtime::{Instance, Module, Store};

    use super::Limit;

    /// Runs a loop of `iterations` (as unsigned) under `limit`, disarmed
    /// and after the limit has passed when `disarm_first`.
    async fn spin(limit: &Limit, iterations: i32, disarm_first: bool) -> anyhow::Result<()> {
        let engine = crate::runtime::new_build_engine()?;
        let wat = r#"(module (func (export "spin") (param i32)
            (loop (br_if 0 (local.tee 0 (i32.sub (local.get 0) (i32.const 1)))))))"#;
        let module = Module::new(&engine, wat::parse_str(wat)?)?;
        let mut store = Store::new(&engine, ());
        let armed = limit.arm(&mut store)?;
        let spin = Instance::new_async(&mut store, &module, &[])
            .await?
            .get_typed_func::<i32, ()>(&mut store, "spin")?;
        if disarm_first {
            drop(armed);
            tokio::time::sleep(limit.limit * 3).await;
        }
        Ok(spin.call_async(&mut store, iterations).await?)
    }

    #[tokio::test]
    async fn endless_code_is_stopped_and_said_so() {
        let limit = Limit::new(Duration::from_millis(200));
        // -1: 2^32 - 1 iterations, about forever.
        assert!(spin(&limit, -1, false).await.is_err());
        let said = limit.exceeded().expect("the limit fired").to_string();
        assert!(said.contains("still running after 0 s"), "{said}");
        assert!(said.contains("AGENTHOST_BUILD_INIT_SECS"), "{said}");
    }

    #[tokio::test]
    async fn a_disarmed_limit_never_fires() {
        let limit = Limit::new(Duration::from_millis(100));
        spin(&limit, 1000, true).await.expect("runs to its end");
        assert!(limit.exceeded().is_none());
    }
}
