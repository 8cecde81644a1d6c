//! agenthost: a single-binary server that hosts AI agents built as WebAssembly components.
//!
//! See ARCHITECTURE.md for the bird's-eye view and the code map.

pub mod journal;
pub mod runtime;
pub mod store;
pub mod util;
pub mod build;
pub mod keys;
pub mod api;
pub mod server;
pub mod cli;
