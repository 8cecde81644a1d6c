//! Core modules shared between deployments by content: a component's large
//! modules (`runtime::compile::split`) compiled once per engine, kept in memory and
//! beside the compile cache in `modules/<engine>/<sha-256>.cwasm` (with the
//! artifact's own hash, checked before deserializing), and linked into each
//! deployment that imports them. A redeploy of a changed Python agent compiles its
//! snapshot, not its interpreter.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Module};

use super::RuntimeError;
use super::engine::fingerprint;
use super::split::{self, SharedModule};
use crate::util::{sha256_hex, write_atomic};

/// Compiled shared modules of one engine.
pub(crate) struct SharedModules {
    dir: PathBuf,
    loaded: Mutex<HashMap<String, Module>>,
}

/// What compiling a component took from the shared modules.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Reuse {
    /// Shared modules found compiled.
    pub found: usize,
    /// Shared modules compiled now.
    pub compiled: usize,
}

impl SharedModules {
    /// The shared modules of `engine` under `root` (the compile cache's
    /// `modules/`): like the cache, several servers may share it, and
    /// deleting it at any time costs only compiling again.
    pub(crate) fn new(root: &Path, engine: &Engine) -> SharedModules {
        SharedModules {
            dir: root.join(fingerprint(engine)),
            loaded: Mutex::default(),
        }
    }

    /// Compiles `component`: its large modules as shared modules (found or
    /// compiled), the rest as a component that imports them. A component
    /// the split leaves whole, or whose split form does not compile,
    /// compiles as it is.
    pub(crate) fn compile(
        &self,
        engine: &Engine,
        component: &[u8],
    ) -> Result<(Vec<u8>, Reuse), wasmtime::Error> {
        let split = match split::split(component) {
            Ok(Some(split)) => split,
            _ => return Ok((engine.precompile_component(component)?, Reuse::default())),
        };
        let mut reuse = Reuse::default();
        for module in &split.modules {
            if self.find(engine, &module.sha256).is_some() {
                reuse.found += 1;
            } else {
                self.compile_module(engine, module)?;
                reuse.compiled += 1;
            }
        }
        match engine.precompile_component(&split.component) {
            Ok(compiled) => Ok((compiled, reuse)),
            Err(err) => {
                tracing::warn!(error = %format!("{err:#}"), "the component's split form does not compile; compiling it whole");
                Ok((engine.precompile_component(component)?, Reuse::default()))
            }
        }
    }

    /// `base` with the shared modules `component` imports defined (`base`
    /// itself, cloned, when it imports none), and whether it imports any.
    /// `original` gives the component's bytes when a module's file is gone
    /// and it must be compiled again. Blocking: call off the async workers.
    pub(crate) fn linker<T: 'static>(
        &self,
        engine: &Engine,
        base: &Linker<T>,
        component: &Component,
        original: &dyn Fn() -> Result<Vec<u8>, RuntimeError>,
    ) -> Result<(Linker<T>, bool), RuntimeError> {
        let mut linker = base.clone();
        let mut missing = Vec::new();
        let mut linked = false;
        for (name, item) in component.component_type().imports(engine) {
            let wasmtime::component::types::ComponentItem::Module(_) = item.ty else {
                continue;
            };
            let Some(sha) = split::shared_sha256(name) else {
                continue;
            };
            linked = true;
            match self.find(engine, sha) {
                Some(module) => define(&mut linker, name, &module)?,
                None => missing.push((name.to_string(), sha.to_string())),
            }
        }
        if missing.is_empty() {
            return Ok((linker, linked));
        }
        let bytes = original()?;
        let split = split::split(&bytes)
            .ok()
            .flatten()
            .ok_or_else(|| RuntimeError::Load("the component no longer splits".into()))?;
        for (name, sha) in missing {
            let module = split
                .modules
                .iter()
                .find(|m| m.sha256 == sha)
                .ok_or_else(|| RuntimeError::Load(format!("the component has no module {sha}")))?;
            let module = self
                .compile_module(engine, module)
                .map_err(|e| RuntimeError::Load(format!("{e:#}")))?;
            define(&mut linker, &name, &module)?;
        }
        Ok((linker, linked))
    }

    /// A compiled module: from memory, else from its hash-checked file.
    fn find(&self, engine: &Engine, sha: &str) -> Option<Module> {
        if let Some(module) = self.lock().get(sha) {
            return Some(module.clone());
        }
        let path = self.dir.join(format!("{sha}.cwasm"));
        let bytes = std::fs::read(&path).ok()?;
        let expected = std::fs::read_to_string(path.with_extension("sha256")).ok()?;
        if sha256_hex(&bytes) != expected.trim() {
            tracing::warn!(
                module = sha,
                "shared module's artifact damaged; compiling it again"
            );
            return None;
        }
        // SAFETY: the bytes were produced by `Engine::precompile_module` of an
        // engine with this fingerprint (the directory's name), and match the
        // hash recorded when they were written.
        let module = unsafe { Module::deserialize(engine, &bytes) }.ok()?;
        self.lock().insert(sha.to_string(), module.clone());
        Some(module)
    }

    fn compile_module(
        &self,
        engine: &Engine,
        module: &SharedModule<'_>,
    ) -> Result<Module, wasmtime::Error> {
        let compiled = engine.precompile_module(&module.bytes)?;
        let stored = std::fs::create_dir_all(&self.dir)
            .and_then(|()| {
                write_atomic(
                    &self.dir.join(format!("{}.cwasm", module.sha256)),
                    &compiled,
                )
            })
            .and_then(|()| {
                write_atomic(
                    &self.dir.join(format!("{}.sha256", module.sha256)),
                    sha256_hex(&compiled).as_bytes(),
                )
            });
        if let Err(err) = stored {
            // Still usable from memory; the next process compiles it again.
            tracing::warn!(module = %module.sha256, error = %err, "cannot keep a shared module on disk");
        }
        // SAFETY: produced just above by this engine.
        let loaded = unsafe { Module::deserialize(engine, &compiled) }?;
        self.lock().insert(module.sha256.clone(), loaded.clone());
        Ok(loaded)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Module>> {
        self.loaded.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn define<T: 'static>(
    linker: &mut Linker<T>,
    name: &str,
    module: &Module,
) -> Result<(), RuntimeError> {
    linker
        .root()
        .module(name, module)
        .map_err(|e| RuntimeError::Load(format!("{e:#}")))
}

#[cfg(test)]
mod tests {
    //! Two components that share a library and differ in their data: the
    //! library compiles once, each component reads its own data, and a
    //! library whose file is gone is compiled again from the original. Two
    //! components whose marked module differs only in its state share its
    //! code, and each runs with its own state.

    use wasmtime::component::{Component, Linker};
    use wasmtime::{Engine, Store};

    use super::super::engine::new_engine_with;
    use super::{RuntimeError, SharedModules};

    /// About 100 KiB of code: above `split::MIN_SHARED_CODE_BYTES`.
    fn filler() -> String {
        (0..4000)
            .map(|i| format!("(func (result i32) i32.const {i} i32.const 7 i32.mul i32.const 3 i32.add i32.const 5 i32.mul i32.const 1 i32.add i32.const 9 i32.xor)\n"))
            .collect()
    }

    /// A component whose library (much code, memory imported) returns the
    /// first byte of the memory the component's own module defines.
    fn component(data: &str) -> Vec<u8> {
        let filler = filler();
        let wat = format!(
            r#"(component
                (core module $own (memory (export "memory") 1) (data (i32.const 0) "{data}"))
                (core module $lib
                    (import "env" "memory" (memory 1))
                    (func (export "first") (result i32) i32.const 0 i32.load8_u)
                    {filler})
                (core instance $own (instantiate $own))
                (core instance $lib (instantiate $lib (with "env" (instance $own))))
                (func (export "first") (result u32) (canon lift (core func $lib "first"))))"#
        );
        wat::parse_str(wat).expect("the test component parses")
    }

    /// Calls the component's `name` export (no arguments, a `u32` back);
    /// `original` is what the linker gets if a module must be compiled again.
    async fn call(
        engine: &Engine,
        shared: &SharedModules,
        bytes: &[u8],
        original: &[u8],
        name: &str,
    ) -> u32 {
        let (compiled, _) = shared.compile(engine, bytes).expect("compiles");
        // SAFETY: produced just above by this engine.
        let component = unsafe { Component::deserialize(engine, &compiled) }.expect("deserializes");
        let original = original.to_vec();
        let linker = shared
            .linker(engine, &Linker::<()>::new(engine), &component, &|| {
                if original.is_empty() {
                    Err(RuntimeError::Load("the original was not needed".into()))
                } else {
                    Ok(original.clone())
                }
            })
            .expect("links")
            .0;
        let mut store = Store::new(engine, ());
        store.set_fuel(u64::MAX).expect("fuel");
        store.set_epoch_deadline(u64::MAX / 2);
        let instance = linker
            .instantiate_async(&mut store, &component)
            .await
            .expect("instantiates");
        let func = instance
            .get_typed_func::<(), (u32,)>(&mut store, name)
            .expect("exported");
        func.call_async(&mut store, ()).await.expect("runs").0
    }

    #[tokio::test]
    async fn a_library_compiles_once_and_each_component_keeps_its_data() {
        let engine = new_engine_with(2, None).expect("engine");
        let dir = tempfile::tempdir().expect("temp dir");
        let shared = SharedModules::new(dir.path(), &engine);
        let (a, b) = (component("A"), component("B"));

        let split = super::split::split(&a)
            .expect("parses")
            .expect("has a library");
        assert_eq!(split.modules.len(), 1);
        wasmparser::Validator::new()
            .validate_all(&split.component)
            .expect("the split form validates");
        assert!(
            split.component.len() < a.len() / 2,
            "the library is out of the component"
        );

        let (_, first) = shared.compile(&engine, &a).expect("compiles");
        assert_eq!((first.found, first.compiled), (0, 1));
        let (_, second) = shared.compile(&engine, &b).expect("compiles");
        assert_eq!((second.found, second.compiled), (1, 0));
        assert_eq!(
            call(&engine, &shared, &a, &[], "first").await,
            u32::from(b'A')
        );
        assert_eq!(
            call(&engine, &shared, &b, &[], "first").await,
            u32::from(b'B')
        );

        // Another process: the library comes from its file.
        let fresh = SharedModules::new(dir.path(), &engine);
        assert_eq!(
            call(&engine, &fresh, &b, &[], "first").await,
            u32::from(b'B')
        );
        let compiled = fresh.compile(&engine, &a).expect("compiles").0;
        // The file gone (the cache deleted): compiled again from the original.
        std::fs::remove_dir_all(dir.path()).expect("delete the modules");
        let emptied = SharedModules::new(dir.path(), &engine);
        // SAFETY: produced just above by this engine.
        let component =
            unsafe { Component::deserialize(&engine, &compiled) }.expect("deserializes");
        let missing = emptied.linker(&engine, &Linker::<()>::new(&engine), &component, &|| {
            Err(RuntimeError::Load("no original".into()))
        });
        assert!(missing.is_err(), "a missing library needs the original");
        assert_eq!(
            call(&engine, &emptied, &a, &a, "first").await,
            u32::from(b'A')
        );
    }

    /// A component whose one big module defines its memory and a global
    /// (its state: `data` at 0, `value` in the global; a passive segment
    /// before it, as wizer leaves one) and is marked as code every build
    /// shares; a second module, instantiated after it, calls it.
    fn marked_component(data: &str, value: u32) -> Vec<u8> {
        let filler = filler();
        let wat = format!(
            r#"(component
                (core module $engine
                    (memory (export "memory") 1)
                    (global $g (mut i32) (i32.const {value}))
                    (data $emptied "")
                    (data (i32.const 0) "{data}")
                    (func (export "first") (result i32)
                        data.drop $emptied
                        i32.const 0 i32.load8_u global.get $g i32.add)
                    {filler}
                    (@custom "agenthost:shared-code" ""))
                (core module $user
                    (import "engine" "first" (func $first (result i32)))
                    (func (export "twice") (result i32) call $first call $first i32.add))
                (core instance $engine (instantiate $engine))
                (core instance $user (instantiate $user (with "engine" (instance $engine))))
                (func (export "first") (result u32) (canon lift (core func $engine "first")))
                (func (export "twice") (result u32) (canon lift (core func $user "twice"))))"#
        );
        wat::parse_str(wat).expect("the test component parses")
    }

    #[tokio::test]
    async fn a_marked_module_shares_its_code_and_keeps_its_state() {
        let engine = new_engine_with(2, None).expect("engine");
        let dir = tempfile::tempdir().expect("temp dir");
        let shared = SharedModules::new(dir.path(), &engine);
        let (a, b) = (marked_component("A", 1), marked_component("B", 2));

        let (split_a, split_b) = (
            super::split::split(&a).expect("parses").expect("splits"),
            super::split::split(&b).expect("parses").expect("splits"),
        );
        assert_eq!(split_a.modules.len(), 1);
        assert_eq!(
            split_a.modules[0].sha256, split_b.modules[0].sha256,
            "one code module for both states"
        );
        wasmparser::Validator::new()
            .validate_all(&split_a.component)
            .expect("the split form validates");
        wasmparser::Validator::new()
            .validate_all(&split_a.modules[0].bytes)
            .expect("the code validates");

        let (_, first) = shared.compile(&engine, &a).expect("compiles");
        assert_eq!((first.found, first.compiled), (0, 1));
        let (_, second) = shared.compile(&engine, &b).expect("compiles");
        assert_eq!((second.found, second.compiled), (1, 0));
        for (bytes, state) in [(&a, u32::from(b'A') + 1), (&b, u32::from(b'B') + 2)] {
            assert_eq!(call(&engine, &shared, bytes, &[], "first").await, state);
            assert_eq!(call(&engine, &shared, bytes, &[], "twice").await, 2 * state);
        }

        // Unmarked, the same module stays inside its component.
        let whole = a
            .windows(b"agenthost:shared-code".len())
            .position(|w| w == b"agenthost:shared-code")
            .map(|at| {
                let mut bytes = a.clone();
                bytes[at..at + 9].copy_from_slice(b"elsewhere");
                bytes
            })
            .expect("the marker");
        assert!(super::split::split(&whole).expect("parses").is_none());
    }

    #[test]
    fn a_component_without_libraries_stays_whole() {
        // Its only module defines its memory, as a Rust agent's does.
        let filler = filler();
        let wat = format!(
            r#"(component (core module $own (memory 1) {filler}) (core instance (instantiate $own)))"#
        );
        let bytes = wat::parse_str(wat).expect("parses");
        assert!(super::split::split(&bytes).expect("parses").is_none());
    }
}
