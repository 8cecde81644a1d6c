//! agenthost: a single-binary server that hosts AI agents built as WebAssembly components.
//!
//! See ARCHITECTURE.md for the bird's-eye view and the code map. Every
//! module is private; what the binary, the end-to-end tests and the
//! benchmarks use is the list below, and nothing else is reachable.

// Inside, an item is `pub(crate)` or narrower: a `pub` that the list
// below does not reach is a warning (`unreachable_pub`, set for the
// workspace in the root Cargo.toml; `-D warnings` refuses it).

mod api;
mod build;
mod cli;
mod cluster;
mod end_users;
mod expiry;
mod journal;
mod keys;
mod metrics;
mod net;
mod redact;
mod retention;
mod runtime;
mod schedules;
mod secrets;
mod server;
mod store;
mod tokens;
mod util;
mod webhooks;

// The server: what it is started with, and the running server.
pub use runtime::TurnSettings;
pub use server::{ServeOptions, Server, StoreChoice};

// The command line (`host/src/main.rs`): its arguments and subcommands.
pub use cli::{
    BenchArgs, Cli, Command, DeployError, DeployOptions, DevArgs, Progress, ServeArgs, bench,
    build as build_agent, deploy, dev, keys as keys_command,
};
pub use keys::mint as mint_key;
pub use util::{create_private_dir, install_tls_provider, write_secret_file};

// The HTTP contract as the end-to-end tests read it: the endpoint table
// (the auth matrix) and the response bodies they decode.
pub use api::views::{CreatedSession, DeploymentView, MintedKey};
pub use api::{Access, endpoints};

// Storage and the journal's encoding, for the benchmarks (`host/benches/`)
// and `host/examples/restart_bench.rs`.
pub use journal::payloads::{Delta, MessageDelta};
pub use journal::{NewEvent, StoredEvent, decode_record, encode_record};
pub use store::By;
pub use store::{
    AgentDescription, Artifact, BuildOutcome, Db, DeploymentStatus, KeyClass, LimitsRecord,
    NewDeployment, Outbox, RedbOptions, SessionFilter, Writer, WriterHandle,
};

/// Internal steps the benchmarks time; not an API.
#[doc(hidden)]
pub mod bench_api;
