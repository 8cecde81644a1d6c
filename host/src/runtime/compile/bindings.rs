//! The one `bindgen!` of the host: Rust types and traits for `wit/agent.wit`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "agent",
    imports: { default: async | trappable },
    exports: { default: async },
});

pub(crate) use self::agenthost::agent::host::Host;
pub(crate) use self::agenthost::agent::types::{
    Decision, Description, Event, HistoryPage, HostError, Reason, Step, ToolCall, ToolStatus, Turn,
};

/// The export every agent must provide.
pub(crate) const GUEST_EXPORT: &str = "agenthost:agent/guest@0.1.0";
