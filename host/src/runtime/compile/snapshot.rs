//! The face `cli::lang` builds through: an instance of a component for a
//! build's snapshot, in the runtime's own store type (so the WASI and HTTP
//! host functions are the runtime's, compiled once into the binary), with
//! `get-directories` answered by the build's hook, the agenthost imports
//! linked as traps and outbound HTTP refused, and `describe` called: what
//! the snapshot then keeps is the imported app.

use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, HasSelf, Instance, Linker};
use wasmtime::{Engine, Store};
use wasmtime_wasi::WasiCtx;
use wasmtime_wasi::p2::bindings::filesystem::preopens;

use super::bindings::Agent;
use super::instance::{AttachedTurn, InstanceState, PreopensHook};

/// A build's store: the runtime's instance state with no turn.
pub(crate) type SnapshotStore<T> = Store<InstanceState<T>>;

/// A store for a build's snapshot: `wasi` as the build made it (its output
/// and preopens), `preopens` answering the guest's `get-directories`.
pub(crate) fn snapshot_store<T: AttachedTurn>(
    engine: &Engine,
    wasi: WasiCtx,
    preopens: PreopensHook,
) -> SnapshotStore<T> {
    Store::new(engine, InstanceState::for_build(wasi, preopens))
}

/// Instantiates `component` in `store` and calls its `describe` (the
/// agent's module-level code runs); the instance, for the snapshot.
pub(crate) async fn describe_for_snapshot<T: AttachedTurn>(
    store: &mut SnapshotStore<T>,
    component: &Component,
) -> anyhow::Result<Instance> {
    let engine = store.engine().clone();
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    linker.allow_shadowing(true);
    preopens::add_to_linker::<InstanceState<T>, HasSelf<InstanceState<T>>>(&mut linker, |s| s)?;
    linker.allow_shadowing(false);
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    agenthost_as_traps(&engine, &mut linker, component)?;
    let instance = linker.instantiate_async(&mut *store, component).await?;
    let agent = Agent::new(&mut *store, &instance)?;
    agent
        .agenthost_agent_guest()
        .call_describe(&mut *store)
        .await?;
    Ok(instance)
}

/// Defines every function of the agenthost imports as a trap: the host
/// answers nothing while a snapshot is taken. (`define_unknown_imports_as_traps`
/// would also shadow the WASI instances the linker matches by semver.)
fn agenthost_as_traps<T: AttachedTurn>(
    engine: &Engine,
    linker: &mut Linker<InstanceState<T>>,
    component: &Component,
) -> anyhow::Result<()> {
    for (name, import) in component.component_type().imports(engine) {
        let ComponentItem::ComponentInstance(instance) = import.ty else {
            continue;
        };
        if !name.starts_with("agenthost:") {
            continue;
        }
        let mut defined = linker.instance(name)?;
        for (export, item) in instance.exports(engine) {
            if let ComponentItem::ComponentFunc(_) = item.ty {
                let called = format!("{name}#{export}");
                defined.func_new(export, move |_, _, _, _| {
                    Err(wasmtime::format_err!(
                        "`{called}` is not available while the agent is built"
                    ))
                })?;
            }
        }
    }
    Ok(())
}
