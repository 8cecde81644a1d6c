//! agenthost-sdk: write agenthost agents (wasm32-wasip2 components) in Rust.
//!
//! An agent implements [`Agent`]: [`Agent::setup`] declares its routes and
//! tools (the host's `describe` is derived from it), and [`Agent::handle`]
//! runs one turn of a session with a [`Turn`], which streams messages, reads
//! the session's history and runs tools. [`export_agent!`] exports it.
//!
//! ```no_run
//! use agenthost_sdk::{Agent, Error, Setup, Turn};
//!
//! struct Hello;
//!
//! impl Agent for Hello {
//!     fn setup(agent: &mut Setup) {
//!         agent.route("/chat");
//!     }
//!
//!     fn handle(turn: &mut Turn) -> Result<(), Error> {
//!         let name = turn.input_text().unwrap_or("world");
//!         turn.say(&format!("Hello, {name}!"))
//!     }
//! }
//!
//! agenthost_sdk::export_agent!(Hello);
//! ```
//!
//! Every turn runs in a fresh instance: nothing survives in memory from one
//! turn to the next, so an agent keeps its context in the session's journal
//! (what it writes) and reads it back with [`Turn::history`]. The end user a
//! session serves, if an end user created it, is [`Turn::end_user`].
//!
//! [`http`] sends outbound HTTP requests (to the origins the deployment's
//! `[outbound] allow` lists), and [`llm::ChatLoop`] runs a model loop over an
//! OpenAI-compatible chat completions API with the agent's tools.

#![warn(missing_docs)]

mod agent;
mod bindings;
mod end_user;
mod error;
mod export;
mod history;
pub mod http;
pub mod journal;
pub mod llm;
mod mcp;
mod message;
mod resume;
mod timers;
mod tools;
mod turn;

pub use agent::{Agent, Setup, ToolBuilder};
pub use end_user::EndUser;
pub use error::{Error, HostError};
pub use history::{ChatMessage, Event, History, Role};
pub use mcp::McpTool;
pub use message::Message;
pub use tools::{ToolCall, ToolResult, ToolStatus};
pub use turn::{Decision, Reason, Turn};

/// Re-exported so agents use the same JSON types as the SDK.
pub use serde_json;

/// Exports an [`Agent`] as the component's `guest` interface.
///
/// Use it once per agent crate (a `cdylib` built for `wasm32-wasip2`). It also
/// installs, once per instance, a panic hook that reports the panic's message
/// and location to the host, so a panic ends the turn with a TURN_ERROR that
/// says why.
#[macro_export]
macro_rules! export_agent {
    ($agent:ty) => {
        const _: () = {
            type AgenthostGlue = $crate::__private::Glue<$agent>;
    $crate::__private::raw_export!(AgenthostGlue with_types_in $crate::__private);
        };
    };
}

/// What `export_agent!` expands to needs; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::raw_export;
    pub use crate::export::Glue;

    /// Only the `guest` export's entry points, at the path the generated
    /// export macro expects; the rest of the bindings stay private.
    pub mod exports {
        /// See [`super`].
        pub mod agenthost {
            /// See [`super`].
            pub mod agent {
                /// See [`super`].
                pub mod guest {
                    pub use crate::bindings::exports::agenthost::agent::guest::{
                        __export_agenthost_agent_guest_0_1_0_cabi, __post_return_describe,
                        __post_return_handle, _export_describe_cabi, _export_handle_cabi,
                    };
                }
            }
        }
    }
}
