//! The instance's resource limiter: `memory_mb` counted over all the linear
//! memories of one instance together, and the pool's table size; it
//! remembers a refused memory growth, so an out-of-memory abort is reported
//! as the memory limit and not as a crash.

use wasmtime::ResourceLimiter;

use super::engine::TABLE_ELEMENTS;

pub(crate) struct MemoryLimiter {
    /// The most bytes all the instance's memories may hold together.
    max_memory: usize,
    /// What they hold now (each memory's growth is added as it is allowed).
    used: usize,
    pub(crate) denied: bool,
}

impl MemoryLimiter {
    pub(crate) fn new(max_memory: usize) -> MemoryLimiter {
        MemoryLimiter {
            max_memory,
            used: 0,
            denied: false,
        }
    }
}

impl ResourceLimiter for MemoryLimiter {
    /// Called for each memory's first allocation (from 0) and every growth,
    /// so `used` is the sum of every memory's size.
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grown = desired.saturating_sub(current);
        let total = self.used.saturating_add(grown);
        if total > self.max_memory {
            self.denied = true;
            return Ok(false);
        }
        self.used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= TABLE_ELEMENTS)
    }
}

#[cfg(test)]
mod tests {
    use wasmtime::{Instance, Module, Store, TypedFunc};

    use super::super::engine::new_engine_with;
    use super::MemoryLimiter;

    const PAGE: usize = 64 << 10;

    /// A module with one memory of one page, and a `grow`.
    const ONE_MEMORY: &str = r#"
        (module
          (memory 1)
          (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0))))
    "#;

    /// A store on the server's own engine under `limiter`, and the module.
    fn store(limiter: MemoryLimiter) -> (Store<MemoryLimiter>, Module) {
        let engine = new_engine_with(2, None).unwrap();
        let module = Module::new(&engine, wat::parse_str(ONE_MEMORY).unwrap()).unwrap();
        let mut store = Store::new(&engine, limiter);
        store.limiter(|l| l);
        store.set_fuel(u64::MAX).unwrap();
        store.set_epoch_deadline(u64::MAX / 2);
        (store, module)
    }

    fn grow(store: &mut Store<MemoryLimiter>, module: &Module) -> TypedFunc<i32, i32> {
        let instance = Instance::new(&mut *store, module, &[]).unwrap();
        instance.get_typed_func(&mut *store, "grow").unwrap()
    }

    #[test]
    fn the_limit_counts_every_memory_of_the_store_together() {
        // Four pages in all: two memories of one page, then one more each.
        let (mut store, module) = store(MemoryLimiter::new(4 * PAGE));
        let grow_a = grow(&mut store, &module);
        let grow_b = grow(&mut store, &module);
        assert_eq!(store.data().used, 2 * PAGE, "both initial pages counted");
        assert_eq!(grow_a.call(&mut store, 1).unwrap(), 1, "a: 1 -> 2 pages");
        assert_eq!(grow_b.call(&mut store, 1).unwrap(), 1, "b: 1 -> 2 pages");
        assert!(!store.data().denied);
        // Each memory alone is far below the limit; together they are at it.
        assert_eq!(grow_a.call(&mut store, 1).unwrap(), -1, "refused");
        assert_eq!(grow_b.call(&mut store, 1).unwrap(), -1, "refused");
        assert!(store.data().denied);
        assert_eq!(store.data().used, 4 * PAGE);
    }

    #[test]
    fn a_memory_whose_first_pages_exceed_what_is_left_is_not_made() {
        let (mut store, module) = store(MemoryLimiter::new(PAGE));
        grow(&mut store, &module);
        assert!(Instance::new(&mut store, &module, &[]).is_err());
        assert!(store.data().denied);
    }
}
