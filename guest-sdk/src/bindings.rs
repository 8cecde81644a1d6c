//! The raw bindings generated from `wit/agent.wit`. Private: the rest of the
//! SDK wraps them, and only the export entry points leave the crate (through
//! `crate::__private`, for `export_agent!`).

wit_bindgen::generate!({
    path: "../wit",
    world: "agent",
    pub_export_macro: true,
    export_macro_name: "raw_export",
});
