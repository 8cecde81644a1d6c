//! Deploy-time checks of a component, in order: component not core module,
//! compiles, imports only what the host provides, exports our world, and
//! `describe` returns a valid description within its limits.

use std::path::Path;
use std::time::Instant;

use wasmtime::component::Component;
use wasmtime::{Store, Trap};

use super::bindings::{AgentPre, Description, GUEST_EXPORT};
use super::instance::{AttachedTurn, InstanceState, apply_limits};
use super::{Compiler, artifacts};
use crate::runtime::RuntimeError;
use crate::runtime::limits::{DESCRIBE_DEADLINE, DESCRIBE_FUEL, DESCRIBE_MEMORY};
use crate::store::{AgentDescription, Artifact, ToolInfo};

/// A tool name: 1 to 64 ASCII letters, digits, `_` or `-`. One rule for
/// every place a tool is named: `describe`, a turn's tool calls, the
/// manifest's `[tools.<name>]` and the approval policy.
pub(crate) fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Why a component cannot be deployed; each message stands on its own.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error(
        "`{0}` is a core WebAssembly module, not a component: build the agent for wasm32-wasip2 (e.g. `cargo build --target wasm32-wasip2`)"
    )]
    CoreModule(String),
    #[error("`{entry}` is not a valid WebAssembly component or cannot be compiled: {detail}")]
    Invalid { entry: String, detail: String },
    #[error("the component needs an import the host does not provide: {0}")]
    MissingImport(String),
    #[error(
        "the component does not export the agenthost world: expected export `{expected}` (with describe and handle), found {found}"
    )]
    WrongExports { expected: String, found: String },
    #[error("describe failed: {0}")]
    Describe(String),
    #[error("describe returned an invalid description: {0}")]
    InvalidDescription(String),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// A component that passed every check, with its artifact stored.
pub struct Prepared {
    pub description: AgentDescription,
    pub artifact: Artifact,
}

const WASM_MAGIC: &[u8; 4] = b"\0asm";
/// Version and layer of a core module (`01 00 00 00`) and of a component (`0d 00 01 00`).
const CORE_VERSION: [u8; 4] = [1, 0, 0, 0];

impl<T: AttachedTurn> Compiler<T> {
    /// Runs every check on the component `bytes` (the bundle's `entry`) and
    /// stores it with its artifact in `dir`. Blocking: call off the async workers.
    pub(crate) fn prepare(
        &self,
        entry: &str,
        bytes: &[u8],
        dir: &Path,
    ) -> Result<Prepared, PrepareError> {
        if bytes.len() >= 8 && bytes[..4] == WASM_MAGIC[..] && bytes[4..8] == CORE_VERSION {
            return Err(PrepareError::CoreModule(entry.to_string()));
        }
        let compiling = Instant::now();
        let cached_before = self.compile_cache.as_ref().map(|c| c.counts());
        let (compiled, reuse) = self
            .shared_modules
            .compile(&self.engine, bytes)
            .map_err(|e| PrepareError::Invalid {
                entry: entry.to_string(),
                detail: format!("{e:#}"),
            })?;
        if let (Some(cache), Some((hits, misses))) = (&self.compile_cache, cached_before) {
            let (hits_now, misses_now) = cache.counts();
            tracing::info!(
                shared_modules_found = reuse.found,
                shared_modules_compiled = reuse.compiled,
                functions_from_cache = hits_now - hits,
                functions_compiled = misses_now - misses,
                duration_ms = compiling.elapsed().as_secs_f64() * 1000.0,
                "compiled"
            );
        }
        // SAFETY: produced just above by this engine.
        let component =
            unsafe { Component::deserialize(&self.engine, &compiled) }.map_err(|e| {
                PrepareError::Invalid {
                    entry: entry.to_string(),
                    detail: format!("{e:#}"),
                }
            })?;
        let original = || Ok(bytes.to_vec());
        let (linker, _) =
            self.shared_modules
                .linker(&self.engine, &self.linker, &component, &original)?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| PrepareError::MissingImport(format!("{e:#}")))?;
        let pre = AgentPre::new(pre).map_err(|_| PrepareError::WrongExports {
            expected: GUEST_EXPORT.to_string(),
            found: export_names(&self.engine, &component),
        })?;
        let description = self.describe(&pre)?;
        let artifact = artifacts::store(&self.engine, dir, bytes, &compiled)?;
        Ok(Prepared {
            description,
            artifact,
        })
    }

    /// Runs `describe` in a fresh instance with `SERVICE_MANIFEST=1` as its
    /// only environment, a short deadline and a small memory limit.
    fn describe(&self, pre: &AgentPre<InstanceState<T>>) -> Result<AgentDescription, PrepareError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(RuntimeError::io("start the describe runtime"))?;
        let mut store = Store::new(
            &self.engine,
            InstanceState::new(&[("SERVICE_MANIFEST", "1")], DESCRIBE_MEMORY),
        );
        apply_limits(&mut store, DESCRIBE_FUEL, DESCRIBE_DEADLINE, Instant::now())
            .map_err(|e| PrepareError::Describe(format!("{e:#}")))?;
        let result = runtime.block_on(async {
            let call = async {
                let agent = pre.instantiate_async(&mut store).await?;
                agent
                    .agenthost_agent_guest()
                    .call_describe(&mut store)
                    .await
            };
            tokio::time::timeout(DESCRIBE_DEADLINE, call).await
        });
        let description = match result {
            Err(_) => {
                return Err(PrepareError::Describe(format!(
                    "it did not return within {} s",
                    DESCRIBE_DEADLINE.as_secs()
                )));
            }
            Ok(Err(err)) => {
                let state = store.data();
                let message = if let Some(panic) = &state.panic {
                    format!("it panicked: {panic}")
                } else if err.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
                    format!("it did not return within {} s", DESCRIBE_DEADLINE.as_secs())
                } else if err.downcast_ref::<Trap>() == Some(&Trap::OutOfFuel) {
                    format!("it did not return within its CPU budget ({DESCRIBE_FUEL} fuel)")
                } else if state.limiter.denied {
                    format!("it used more than {} MiB of memory", DESCRIBE_MEMORY >> 20)
                } else {
                    format!("it trapped: {}", trap_message(&err))
                };
                let (stderr, _) = state.stderr.contents();
                let message = match stderr.trim() {
                    "" => message,
                    output => format!("{message}\n--- stderr ---\n{output}"),
                };
                return Err(PrepareError::Describe(message));
            }
            Ok(Ok(description)) => description,
        };
        validate(description).map_err(PrepareError::InvalidDescription)
    }
}

/// The short, meaningful part of a trap (the full error goes to the log).
pub(crate) fn trap_message(err: &wasmtime::Error) -> String {
    match err.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => format!("{:#}", err.root_cause()),
    }
}

fn export_names(engine: &wasmtime::Engine, component: &Component) -> String {
    let names: Vec<String> = component
        .component_type()
        .exports(engine)
        .map(|(name, _)| format!("`{name}`"))
        .collect();
    if names.is_empty() {
        "no exports".into()
    } else {
        names.join(", ")
    }
}

fn valid_route(route: &str) -> bool {
    route.starts_with('/')
        && route.len() <= 128
        && route[1..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

/// Checks the description and turns it into its stored form.
fn validate(description: Description) -> Result<AgentDescription, String> {
    let mut errors = Vec::new();
    if description.routes.is_empty() {
        errors.push("it lists no route".to_string());
    }
    for (i, route) in description.routes.iter().enumerate() {
        if !valid_route(route) {
            errors.push(format!(
                "route `{route}` must start with `/` and use only letters, digits and - _ . /"
            ));
        }
        if description.routes[..i].contains(route) {
            errors.push(format!("route `{route}` is listed twice"));
        }
    }
    let mut tools = Vec::new();
    for (i, tool) in description.tools.iter().enumerate() {
        if !valid_tool_name(&tool.name) {
            errors.push(format!(
                "tool name `{}` must be 1 to 64 letters, digits, _ or -",
                tool.name
            ));
        }
        if description.tools[..i].iter().any(|t| t.name == tool.name) {
            errors.push(format!("tool `{}` is listed twice", tool.name));
        }
        match serde_json::from_str::<serde_json::Value>(&tool.parameters) {
            Ok(parameters) if parameters.is_object() => tools.push(ToolInfo {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters,
                needs_approval: tool.needs_approval,
            }),
            _ => errors.push(format!(
                "the parameters of tool `{}` are not a JSON Schema object",
                tool.name
            )),
        }
    }
    if errors.is_empty() {
        Ok(AgentDescription {
            routes: description.routes,
            tools,
        })
    } else {
        Err(errors.join("; "))
    }
}
