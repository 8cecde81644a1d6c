//! The second snapshot of a Python build: the cached base component
//! (`python_base`) run in this process, its `describe` called so that
//! `agenthost._loader` imports the project's `app`, and the memory and
//! globals written into a new component by wasmtime's wizer (its component
//! mode), as componentize-py writes its own snapshot.
//!
//! The instance sees the project and the base's staged files read-only
//! (to the loader only: see `loader_only_preopens` below), an environment
//! holding only `AGENTHOST_PYTHON_SNAPSHOT`, traps for the agenthost host
//! functions and outbound HTTP refused, as `describe` at deploy time: an
//! app that calls them while it is imported fails the build. The
//! instrumented base is compiled once per engine fingerprint and kept in
//! the base's cache directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, anyhow};
use wasmtime::Engine;
use wasmtime::component::{Component, ComponentType, Instance, Lift, WasmList};
use wasmtime_wasi::p2::bindings::filesystem::preopens;
use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};
use wasmtime_wizer::{ComponentInstanceState, Wizer};

use super::{base_cache, init_limit};
use crate::runtime::{self, PreopensHook, SnapshotStore};

/// The variable `agenthost._loader` looks for (`SNAPSHOT_VAR` there).
const SNAPSHOT_VAR: &str = "AGENTHOST_PYTHON_SNAPSHOT";

/// How much of the app's output while it is imported is kept for an error.
const OUTPUT_LIMIT: usize = 1 << 20;

/// The directories the second snapshot mounts, each under the name
/// componentize-py gave it when it built the base.
pub(super) struct Mounts {
    /// The project (`/0`).
    pub(super) project: PathBuf,
    /// The SDK the base was built with (`/1`).
    pub(super) sdk: PathBuf,
    /// The project venv's site-packages, if any (`/2`).
    pub(super) site_packages: Option<PathBuf>,
    /// componentize-py's standard library, bindings and helpers, as the
    /// base staged them (`/python`, `/world`, `/bundled`).
    pub(super) staged: PathBuf,
}

/// Snapshots `base` (in the cache directory `cache`) with the project of
/// `mounts` imported, and returns the component. Blocking.
pub(super) fn snapshot(base: &Path, cache: &Path, mounts: Mounts) -> anyhow::Result<Vec<u8>> {
    let bytes = std::fs::read(base).with_context(|| format!("cannot read {}", base.display()))?;
    let cache = cache.to_path_buf();
    // Its own thread and runtime: the caller may or may not be in one.
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("cannot start the snapshot's runtime")?;
                runtime.block_on(run(bytes, cache, mounts))
            })
            .join()
            .map_err(|_| anyhow!("the Python snapshot panicked"))?
    })
}

async fn run(bytes: Vec<u8>, cache: PathBuf, mounts: Mounts) -> anyhow::Result<Vec<u8>> {
    let engine = runtime::new_build_engine()?;
    let stdout = MemoryOutputPipe::new(OUTPUT_LIMIT);
    let stderr = MemoryOutputPipe::new(OUTPUT_LIMIT);
    let wasi = context(&mounts, &stdout, &stderr)?;
    let files_used = Arc::new(AtomicBool::new(false));
    let used = files_used.clone();
    let started = Instant::now();
    let limit = init_limit::Limit::from_env()?;
    let wizer = Wizer::new();
    let init = async {
        let (instrumented_base, instrumented) = wizer.instrument_component(&bytes)?;
        tracing::debug!(elapsed = ?started.elapsed(), "python snapshot: base instrumented");
        let component = compiled(&engine, &cache, &instrumented)?;
        tracing::debug!(elapsed = ?started.elapsed(), "python snapshot: instrumented base loaded");
        // The runtime's own store type and host functions (`runtime::snapshot_store`).
        let mut store = runtime::snapshot_store(&engine, wasi, loader_only_preopens(files_used));
        let armed = limit.arm(&mut store)?;
        let instance = runtime::describe_for_snapshot(&mut store, &component).await?;
        drop(armed);
        tracing::debug!(elapsed = ?started.elapsed(), "python snapshot: app imported");
        let mut snapshotted = Snapshotted {
            store,
            instance,
            failed: None,
        };
        let snapshot = wizer
            .snapshot_component(&instrumented_base, &mut snapshotted)
            .await?;
        match snapshotted.failed {
            Some(err) => Err(err.context("cannot read the imported app's state")),
            None => Ok(snapshot),
        }
    }
    .await;
    tracing::debug!(elapsed = ?started.elapsed(), "python snapshot: written");
    init.map_err(|err| {
        if let Some(exceeded) = limit.exceeded() {
            return exceeded;
        }
        let mut said = String::from_utf8_lossy(&stdout.contents()).into_owned();
        said.push_str(&String::from_utf8_lossy(&stderr.contents()));
        let said = python_said(&said);
        let mut message = if said.is_empty() {
            format!("cannot import the agent's app: {err:#}")
        } else {
            format!("cannot import the agent's app:\n\n{said}")
        };
        if used.load(Ordering::Relaxed) && said.contains("Error: [Errno 44]") {
            message.push_str(
                "\n\nnote: a Python agent cannot read files (with `open`, `os` or \
                 `pathlib`) while it is imported or when it runs: none are there. \
                 Put what it needs in its code.",
            );
        }
        anyhow!(message)
    })
}

/// What Python printed, without the loader's frames and componentize-py's
/// panic (its way to fail a call that raised).
fn python_said(output: &str) -> String {
    let noise = [
        "File \"/1/agenthost/_loader.py\"",
        "File \"<frozen importlib._bootstrap>\"",
        "thread '<unnamed>'",
        "Python function threw an unexpected exception",
        "note: run with `RUST_BACKTRACE=1`",
    ];
    let kept: Vec<String> = output
        .lines()
        .filter(|line| !noise.iter().any(|n| line.trim_start().starts_with(n)))
        .map(short_path)
        .collect();
    kept.join("\n").trim().to_owned()
}

/// A traceback's `File "/0/app.py"` as the author knows it, `File
/// "app.py"`, as the SDK shows run-time tracebacks: componentize-py mounts
/// each Python path entry at `/<n>/`.
fn short_path(line: &str) -> String {
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    if let Some(rest) = body.strip_prefix("File \"/")
        && let Some((mount, path)) = rest.split_once('/')
        && !mount.is_empty()
        && mount.bytes().all(|b| b.is_ascii_digit())
    {
        return format!("{indent}File \"{path}");
    }
    line.to_owned()
}

/// WASI for the snapshot: the mounts read-only, no arguments, only
/// `SNAPSHOT_VAR` in the environment, output kept in memory.
fn context(
    mounts: &Mounts,
    stdout: &MemoryOutputPipe,
    stderr: &MemoryOutputPipe,
) -> anyhow::Result<WasiCtx> {
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdin(MemoryInputPipe::new(Vec::new()))
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .env(SNAPSHOT_VAR, "1");
    let mut dirs = vec![("0", mounts.project.clone()), ("1", mounts.sdk.clone())];
    if let Some(site) = &mounts.site_packages {
        dirs.push(("2", site.clone()));
    }
    for name in ["python", "world", "bundled"] {
        dirs.push((name, mounts.staged.join(name)));
    }
    for (name, dir) in dirs {
        wasi.preopened_dir(&dir, name, FsPerms::ReadOnly)
            .map_err(|e| anyhow!("cannot open {}: {e:#}", dir.display()))?;
    }
    Ok(wasi.build())
}

/// The instrumented base, compiled: from the cache when this engine
/// compiled it before, else compiled and kept.
///
/// Keyed by the engine and the instrumenter alone: a base directory holds
/// one base, and wizer instruments a base the same way every time. (The
/// `instrumented-*.cwasm` files of component-init-transform, which made
/// the snapshot before wizer, are another instrumentation: not read.)
fn compiled(engine: &Engine, cache: &Path, instrumented: &[u8]) -> anyhow::Result<Component> {
    let fingerprint = runtime::fingerprint(engine);
    base_cache::compiled(
        &cache.join(format!("wizer-instrumented-{fingerprint}.cwasm")),
        // SAFETY: the file is `Engine::precompile_component`'s output for an
        // engine of this fingerprint, written atomically (a rename) by
        // `base_cache::compiled` into the user's own cache, beside the base
        // it was made from; or these bytes were just produced below.
        |bytes| Ok(unsafe { Component::deserialize(engine, bytes) }?),
        || {
            tracing::debug!(
                "python snapshot: compiling the instrumented base (once per base and engine)"
            );
            Ok(engine.precompile_component(instrumented)?)
        },
    )
}

/// The preopens, to `agenthost._loader` only. wasi-libc asks for them once
/// it first needs a path and keeps what it got, and the snapshot would keep
/// that: so only the second call (the loader's: it asks twice if its first
/// call is the first) gets the mounts, and every other call none, the
/// agent's run-time truth. A call after the loader's is wasi-libc's: the app
/// (or a traceback being printed) looked for a file; `files_used` is set.
fn loader_only_preopens(files_used: Arc<AtomicBool>) -> PreopensHook {
    let mut calls = 0u32;
    Box::new(move |mut filesystem| {
        calls += 1;
        match calls {
            1 => Ok(Vec::new()),
            2 => preopens::Host::get_directories(&mut filesystem),
            _ => {
                files_used.store(true, Ordering::Relaxed);
                Ok(Vec::new())
            }
        }
    })
}

/// What wizer reads the snapshot through: the functions it added to the
/// instrumented component (`wasmtime:wizer/access`). Its trait cannot fail,
/// so the first failure is kept in `failed`, every later read skipped, and
/// the snapshot refused.
struct Snapshotted {
    store: SnapshotStore,
    instance: Instance,
    failed: Option<anyhow::Error>,
}

impl Snapshotted {
    async fn call<R>(&mut self, instance: &str, function: &str) -> Option<R>
    where
        R: ComponentType + Lift + Send + Sync + 'static,
    {
        if self.failed.is_some() {
            return None;
        }
        match self.try_call(instance, function).await {
            Ok(value) => Some(value),
            Err(err) => {
                self.failed = Some(err);
                None
            }
        }
    }

    async fn try_call<R>(&mut self, instance: &str, function: &str) -> anyhow::Result<R>
    where
        R: ComponentType + Lift + Send + Sync + 'static,
    {
        let missing = || anyhow!("the instrumented component exports no `{instance}#{function}`");
        let (_, exported) = self
            .instance
            .get_export(&mut self.store, None, instance)
            .ok_or_else(missing)?;
        let (_, index) = self
            .instance
            .get_export(&mut self.store, Some(&exported), function)
            .ok_or_else(missing)?;
        let func = self
            .instance
            .get_typed_func::<(), (R,)>(&mut self.store, index)?;
        Ok(func.call_async(&mut self.store, ()).await?.0)
    }
}

impl ComponentInstanceState for Snapshotted {
    async fn call_func_ret_list_u8(
        &mut self,
        instance: &str,
        func: &str,
        contents: impl FnOnce(&[u8]) + Send,
    ) {
        if let Some(list) = self.call::<WasmList<u8>>(instance, func).await {
            contents(list.as_le_slice(&self.store));
        }
    }

    async fn call_func_ret_s32(&mut self, instance: &str, func: &str) -> i32 {
        self.call(instance, func).await.unwrap_or_default()
    }

    async fn call_func_ret_s64(&mut self, instance: &str, func: &str) -> i64 {
        self.call(instance, func).await.unwrap_or_default()
    }

    async fn call_func_ret_f32(&mut self, instance: &str, func: &str) -> u32 {
        self.call(instance, func).await.map_or(0, f32::to_bits)
    }

    async fn call_func_ret_f64(&mut self, instance: &str, func: &str) -> u64 {
        self.call(instance, func).await.map_or(0, f64::to_bits)
    }
}

#[cfg(test)]
mod tests {
    use super::python_said;

    #[test]
    fn build_tracebacks_name_files_as_the_author_knows_them() {
        let output = "Traceback (most recent call last):\n  \
                      File \"/1/agenthost/_loader.py\", line 9, in _load\n  \
                      File \"/0/app.py\", line 3, in <module>\n    \
                      raise ValueError(\"no kettle\")\n  \
                      File \"/2/requests/api.py\", line 1, in get\n  \
                      File \"/python/json/__init__.py\", line 1, in loads\n\
                      ValueError: no kettle\n";
        assert_eq!(
            python_said(output),
            "Traceback (most recent call last):\n  \
             File \"app.py\", line 3, in <module>\n    \
             raise ValueError(\"no kettle\")\n  \
             File \"requests/api.py\", line 1, in get\n  \
             File \"/python/json/__init__.py\", line 1, in loads\n\
             ValueError: no kettle"
        );
    }
}
