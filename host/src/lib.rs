//! agenthost: a single-binary server that hosts AI agents built as WebAssembly components.
//!
//! See ARCHITECTURE.md for the bird's-eye view and the code map.

pub mod api;
#[doc(hidden)]
pub mod bench_api;
pub mod build;
pub mod cli;
pub mod cluster;
mod expiry;
pub mod journal;
pub mod keys;
pub mod metrics;
mod retention;
pub mod runtime;
pub mod secrets;
pub mod server;
pub mod store;
pub mod tokens;
pub mod util;
