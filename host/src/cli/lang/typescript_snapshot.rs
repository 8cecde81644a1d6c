//! The snapshot of a TypeScript build, in this process, as componentize-js
//! makes it with the wizer CLI and jco: the cached base's spliced engine
//! (`typescript_base`) is run by wizer (the `wasmtime-wizer` crate) with
//! WASI preview 1 until it has evaluated the agent's bundle, its state is
//! moved into the base's stubbed engine (`transplant`), and that module is
//! made a component with the WASI preview 1 adapter (wit-component).
//!
//! The engine's initialiser sees the build directory (the bundle and the
//! generated bindings) read-only, the environment componentize-js gives it
//! and nothing of the builder's own, and its arguments on stdin; any other
//! import traps. The instrumented engine is compiled once per engine
//! fingerprint and kept in the base's cache directory.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use wasm_encoder::RawSection;
use wasmparser::{Parser, Payload};
use wasmtime::{Instance, Module, Store};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};
use wasmtime_wizer::{InstanceState, SnapshotVal, ValType, Wizer};

use super::typescript_base::Base;
use super::{base_cache, init_limit};

/// The engine's initialisation function (componentize-js's `--init-func`).
const INIT: &str = "componentize.wizer";

/// How much of the initialiser's output is kept for an error.
const OUTPUT_LIMIT: usize = 1 << 20;

/// The bundle's name in the build directory, as the engine reports it in stacks.
pub(super) const BUNDLE: &str = "agent.js";

/// Makes the component of the bundle `dir/agent.js` from `base`. Blocking.
pub(super) fn snapshot(base: &Base, dir: &Path) -> anyhow::Result<Vec<u8>> {
    // Its own thread and runtime: the caller may or may not be in one.
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("cannot start the snapshot's runtime")?;
                runtime.block_on(run(base, dir))
            })
            .join()
            .map_err(|_| anyhow!("the TypeScript snapshot panicked"))?
    })
}

async fn run(base: &Base, dir: &Path) -> anyhow::Result<Vec<u8>> {
    let read = |path: &Path| {
        std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
    };
    let spliced = read(&base.spliced())?;
    // Where componentize-js puts the bindings: the SDK leaves frames of a
    // `.../sources/initializer.js` out of an error's stack.
    let sources = dir.join("sources");
    std::fs::create_dir_all(&sources)
        .with_context(|| format!("cannot create {}", sources.display()))?;
    std::fs::copy(base.initializer(), sources.join("initializer.js"))
        .with_context(|| format!("cannot copy {}", base.initializer().display()))?;
    let mut wizer = Wizer::new();
    wizer.init_func(INIT);
    let (cx, instrumented) = wizer.instrument(&spliced)?;

    let engine = crate::runtime::new_build_engine()?;
    let fingerprint = crate::runtime::fingerprint(&engine);
    let module = base_cache::compiled(
        &base.dir.join(format!("instrumented-{fingerprint}.cwasm")),
        // SAFETY: the file is `Engine::precompile_module`'s output for an
        // engine of this fingerprint, written atomically (a rename) by
        // `base_cache::compiled` into the user's own cache, beside the base
        // it was made from; or these bytes were just produced below.
        |bytes| Ok(unsafe { Module::deserialize(&engine, bytes) }?),
        || {
            eprintln!("compiling the TypeScript engine for builds (once per base)");
            Ok(engine.precompile_module(&instrumented)?)
        },
    )?;

    let stdout = MemoryOutputPipe::new(OUTPUT_LIMIT);
    let stderr = MemoryOutputPipe::new(OUTPUT_LIMIT);
    let env: BTreeMap<String, String> = serde_json::from_slice(&read(&base.env())?)
        .with_context(|| format!("{} is not the base's environment", base.env().display()))?;
    let wasi = context(dir, &env, &stdout, &stderr)?;
    let mut linker = wasmtime::Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |wasi: &mut WasiP1Ctx| wasi)?;
    linker.define_unknown_imports_as_traps(&module)?;
    let mut store = Store::new(&engine, wasi);
    let limit = init_limit::Limit::from_env()?;
    let _armed = limit.arm(&mut store)?;
    let instance = linker.instantiate_async(&mut store, &module).await?;
    let said = || {
        let mut said = String::from_utf8_lossy(&stdout.contents()).into_owned();
        said.push_str(&String::from_utf8_lossy(&stderr.contents()));
        said.trim().to_owned()
    };
    initialize(&mut store, &instance).await.map_err(|err| {
        if let Some(exceeded) = limit.exceeded() {
            return exceeded;
        }
        let said = said();
        if said.is_empty() {
            anyhow!("cannot evaluate the agent's code: {err:#}")
        } else {
            anyhow!("cannot evaluate the agent's code:\n\n{said}")
        }
    })?;
    let wizened = wizer
        .snapshot(
            &cx,
            &mut Live {
                store: &mut store,
                instance,
            },
        )
        .await?;
    // After the snapshot: reporting clears the engine's pending exception.
    let status = instance
        .get_typed_func::<(), i32>(&mut store, "check_init")?
        .call_async(&mut store, ())
        .await?;
    match status {
        0 => {}
        1 => bail!(
            "the agent's bundle does not export what its world needs:\n\n{}",
            said()
        ),
        2 => bail!(
            "cannot read the types of the agent's exports:\n\n{}",
            said()
        ),
        other => bail!(
            "the agent's code could not be initialised ({other}):\n\n{}",
            said()
        ),
    }

    let module = transplant(&read(&base.stubbed())?, &wizened)?;
    let component = wit_component::ComponentEncoder::default()
        .validate(true)
        .module(&module)?
        .adapter("wasi_snapshot_preview1", &read(&base.adapter())?)?
        .encode()?;
    let mut producers = wasm_metadata::Producers::empty();
    producers.add("language", "JavaScript", "");
    producers.add("processed-by", "ComponentizeJS", &base.version);
    producers.add_to_wasm(&component)
}

/// As wizer: the reactor's `_initialize`, then the initialisation function.
async fn initialize(store: &mut Store<WasiP1Ctx>, instance: &Instance) -> anyhow::Result<()> {
    if let Some(reactor) = instance.get_func(&mut *store, "_initialize") {
        reactor
            .typed::<(), ()>(&*store)?
            .call_async(&mut *store, ())
            .await?;
    }
    instance
        .get_typed_func::<(), ()>(&mut *store, INIT)?
        .call_async(&mut *store, ())
        .await?;
    Ok(())
}

/// WASI for the initialiser, as componentize-js runs wizer: the bindings'
/// directory (`sources/`) at its own path, the build directory as `/`, the
/// base's environment, and the engine's arguments on stdin.
fn context(
    dir: &Path,
    env: &BTreeMap<String, String>,
    stdout: &MemoryOutputPipe,
    stderr: &MemoryOutputPipe,
) -> anyhow::Result<WasiP1Ctx> {
    let prefix = dir
        .to_str()
        .context("the build directory's path is not UTF-8")?;
    let sources = format!("{prefix}/sources");
    let args = format!(
        "--initializer-script-path {sources}/initializer.js --strip-path-prefix {prefix}/ {BUNDLE}"
    );
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdin(MemoryInputPipe::new(args))
        .stdout(stdout.clone())
        .stderr(stderr.clone());
    for (name, value) in env {
        wasi.env(name, value);
    }
    for (host, guest) in [(Path::new(&sources), sources.as_str()), (dir, "/")] {
        wasi.preopened_dir(host, guest, FsPerms::ReadOnly)
            .map_err(|e| anyhow!("cannot open {}: {e:#}", host.display()))?;
    }
    Ok(wasi.build_p1())
}

/// What wizer reads the snapshot through: the live instance.
struct Live<'a> {
    store: &'a mut Store<WasiP1Ctx>,
    instance: Instance,
}

impl InstanceState for Live<'_> {
    async fn global_get(&mut self, name: &str, _: ValType) -> SnapshotVal {
        // wizer asks only for the globals its instrumentation exported.
        let value = self
            .instance
            .get_global(&mut *self.store, name)
            .map(|global| global.get(&mut *self.store));
        match value {
            Some(wasmtime::Val::I32(x)) => SnapshotVal::I32(x),
            Some(wasmtime::Val::I64(x)) => SnapshotVal::I64(x),
            Some(wasmtime::Val::F32(x)) => SnapshotVal::F32(x),
            Some(wasmtime::Val::F64(x)) => SnapshotVal::F64(x),
            Some(wasmtime::Val::V128(x)) => SnapshotVal::V128(x.as_u128()),
            _ => unreachable!("wizer instruments numeric globals only: {name}"),
        }
    }

    async fn memory_contents(&mut self, name: &str, contents: impl FnOnce(&[u8]) + Send) {
        match self.instance.get_memory(&mut *self.store, name) {
            Some(memory) => contents(memory.data(&*self.store)),
            None => unreachable!("wizer reads the memories it instrumented: {name}"),
        }
    }
}

/// The sections that hold a module's state: a snapshot changes only these
/// (and drops the initialisation exports and the start function).
const MEMORY: u8 = 5;
const GLOBAL: u8 = 6;
const EXPORT: u8 = 7;
const START: u8 = 8;
const CODE: u8 = 10;
const DATA: u8 = 11;
const DATA_COUNT: u8 = 12;

/// The stubbed engine with the snapshot's state: `stubbed` is the spliced
/// engine with some imports replaced by functions (which moves function
/// indices, not globals, memories or data), `wizened` the spliced engine
/// after wizer. Every section comes from `stubbed` except the memories,
/// globals and data, which come from `wizened`; the exports lose the
/// initialisation functions, as wizer drops them. The module is marked as
/// code every build of the base shares ([`crate::runtime::SHARED_CODE_MARKER`]).
pub(super) fn transplant(stubbed: &[u8], wizened: &[u8]) -> anyhow::Result<Vec<u8>> {
    let sections = |bytes: &[u8]| -> anyhow::Result<Vec<(u8, std::ops::Range<usize>)>> {
        let mut found = Vec::new();
        for payload in Parser::new(0).parse_all(bytes) {
            let payload = payload?;
            if let Payload::GlobalSection(reader) = &payload {
                for global in reader.clone() {
                    if matches!(global?.ty.content_type, wasmparser::ValType::Ref(_)) {
                        bail!("the TypeScript engine has a global of a reference type");
                    }
                }
            }
            if let Some(section) = payload.as_section() {
                found.push(section);
            }
        }
        Ok(found)
    };
    let state: BTreeMap<u8, std::ops::Range<usize>> = sections(wizened)?
        .into_iter()
        .filter(|(id, _)| [MEMORY, GLOBAL, DATA, DATA_COUNT].contains(id))
        .collect();
    let from_wizened = |id: u8| {
        state.get(&id).map(|range| RawSection {
            id,
            data: &wizened[range.clone()],
        })
    };
    let mut module = wasm_encoder::Module::new();
    let mut taken = Vec::new();
    let mut exports = wasm_encoder::ExportSection::new();
    for (id, range) in sections(stubbed)? {
        let raw = RawSection {
            id,
            data: &stubbed[range.clone()],
        };
        match id {
            MEMORY | GLOBAL | DATA | DATA_COUNT => {
                if let Some(section) = from_wizened(id) {
                    module.section(&section);
                    taken.push(id);
                }
            }

            EXPORT => {
                let reader = wasmparser::ExportSectionReader::new(wasmparser::BinaryReader::new(
                    raw.data, 0,
                ))?;
                for export in reader {
                    let export = export?;
                    if export.name == INIT || export.name == "_initialize" {
                        continue;
                    }
                    let kind = wasm_encoder::ExportKind::from(export.kind);
                    exports.export(export.name, kind, export.index);
                }
                module.section(&exports);
            }

            START => {}
            CODE => {
                // The snapshot may add a data count the stubbed engine had no need for.
                if !taken.contains(&DATA_COUNT)
                    && let Some(section) = from_wizened(DATA_COUNT)
                {
                    module.section(&section);
                    taken.push(DATA_COUNT);
                }
                module.section(&raw);
            }
            _ => {
                module.section(&raw);
            }
        }
    }
    for id in [MEMORY, GLOBAL, DATA_COUNT, DATA] {
        if state.contains_key(&id) && !taken.contains(&id) {
            bail!(
                "the TypeScript engine's snapshot has a section (id {id}) its stubbed engine lacks"
            );
        }
    }
    // Every build of this base has the same code: the server compiles it
    // once and keeps each build's state apart (`runtime::compile::split_state`).
    module.section(&wasm_encoder::CustomSection {
        name: std::borrow::Cow::Borrowed(crate::runtime::SHARED_CODE_MARKER),
        data: std::borrow::Cow::Borrowed(&[]),
    });
    // wit-component validates the module as it makes the component.
    Ok(module.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spliced engine in small: two imports, a counter, a constant, data.
    const SPLICED: &str = r#"(module
        (import "host" "f" (func $f (result i32)))
        (import "host" "g" (func $g (result i32)))
        (memory (export "memory") 1)
        (global $counter (mut i32) (i32.const 0))
        (global $k i32 (i32.const 7))
        (data (i32.const 16) "before")
        (func (export "_initialize") (global.set $counter (i32.const 1)))
        (func (export "componentize.wizer")
            (global.set $counter (i32.add (global.get $counter) (i32.const 40)))
            (i32.store (i32.const 16) (i32.const 0x65746661)))
        (func (export "get") (result i32) (global.get $counter))
        (func (export "k") (result i32) (global.get $k))
        (func (export "calls_g") (result i32) (call $g)))"#;

    /// The same with `g` stubbed out, as `stubWasi` does: a function now,
    /// so every later function index moves.
    const STUBBED: &str = r#"(module
        (import "host" "f" (func $f (result i32)))
        (memory (export "memory") 1)
        (global $counter (mut i32) (i32.const 0))
        (global $k i32 (i32.const 7))
        (data (i32.const 16) "before")
        (func $g (result i32) (i32.const 99))
        (func (export "_initialize") (global.set $counter (i32.const 1)))
        (func (export "componentize.wizer")
            (global.set $counter (i32.add (global.get $counter) (i32.const 40)))
            (i32.store (i32.const 16) (i32.const 0x65746661)))
        (func (export "get") (result i32) (global.get $counter))
        (func (export "k") (result i32) (global.get $k))
        (func (export "calls_g") (result i32) (call $g)))"#;

    #[tokio::test]
    async fn the_snapshot_of_the_spliced_engine_moves_into_the_stubbed_one() {
        let spliced = wat::parse_str(SPLICED).unwrap();
        let mut wizer = Wizer::new();
        wizer.init_func(INIT);
        let (cx, instrumented) = wizer.instrument(&spliced).unwrap();
        let engine = crate::runtime::new_build_engine().unwrap();
        let module = Module::new(&engine, &instrumented).unwrap();
        let mut linker = wasmtime::Linker::new(&engine);
        linker.define_unknown_imports_as_traps(&module).unwrap();
        let mut store = Store::new(&engine, WasiCtxBuilder::new().build_p1());
        let limit = init_limit::Limit::new(std::time::Duration::from_secs(600));
        let _armed = limit.arm(&mut store).unwrap();
        let instance = linker.instantiate_async(&mut store, &module).await.unwrap();
        initialize(&mut store, &instance).await.unwrap();
        let wizened = wizer
            .snapshot(
                &cx,
                &mut Live {
                    store: &mut store,
                    instance,
                },
            )
            .await
            .unwrap();

        let stubbed = wat::parse_str(STUBBED).unwrap();
        let module = transplant(&stubbed, &wizened).unwrap();
        let marked = wasmparser::Parser::new(0).parse_all(&module).any(|p| {
            matches!(p, Ok(Payload::CustomSection(c)) if c.name() == crate::runtime::SHARED_CODE_MARKER)
        });
        assert!(marked, "marked as code every build shares");
        let module = Module::new(&engine, &module).unwrap();
        let names: Vec<&str> = module.exports().map(|e| e.name()).collect();
        assert_eq!(names, ["memory", "get", "k", "calls_g"]);

        let mut linker = wasmtime::Linker::new(&engine);
        linker.func_wrap("host", "f", || 5).unwrap();
        let mut store = Store::new(&engine, ());
        let _armed = limit.arm(&mut store).unwrap();
        let instance = linker.instantiate_async(&mut store, &module).await.unwrap();
        let mut call = |name: &str| {
            instance
                .get_typed_func::<(), i32>(&mut store, name)
                .unwrap()
        };
        let (get, k, calls_g) = (call("get"), call("k"), call("calls_g"));
        assert_eq!(get.call_async(&mut store, ()).await.unwrap(), 41);
        assert_eq!(k.call_async(&mut store, ()).await.unwrap(), 7);
        assert_eq!(calls_g.call_async(&mut store, ()).await.unwrap(), 99);
        let memory = instance.get_memory(&mut store, "memory").unwrap();
        assert_eq!(&memory.data(&store)[16..22], b"aftere");
    }

    #[test]
    fn a_reference_global_is_refused() {
        let with_ref = wat::parse_str(
            r#"(module (global (mut funcref) (ref.null func)) (memory 1) (data (i32.const 0) "x"))"#,
        )
        .unwrap();
        let err = transplant(&with_ref, &with_ref).unwrap_err().to_string();
        assert!(err.contains("reference type"), "{err}");
    }
}
