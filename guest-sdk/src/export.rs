//! The `guest` export behind `export_agent!`: `describe` from `Agent::setup`,
//! `handle` around `Agent::handle` (a resumed step run first), and the panic
//! hook that reports panics.

use std::any::Any;
use std::marker::PhantomData;
use std::panic::{self, Location};
use std::rc::Rc;
use std::sync::Once;

use crate::agent::{Agent, Setup};
use crate::bindings::agenthost::agent::host;
use crate::bindings::agenthost::agent::types as wit;
use crate::bindings::exports::agenthost::agent::guest::Guest;
use crate::error::Error;
use crate::turn::Turn;

/// Implements the raw `guest` interface for agent `A`. Used by `export_agent!` only.
#[doc(hidden)]
pub struct Glue<A>(PhantomData<A>);

impl<A: Agent> Guest for Glue<A> {
    fn describe() -> wit::Description {
        install_panic_hook();
        let setup = setup::<A>();
        wit::Description {
            routes: setup.routes,
            tools: setup
                .tools
                .into_iter()
                .map(|tool| wit::ToolSpec {
                    name: tool.name,
                    description: tool.description,
                    parameters: tool.parameters.to_string(),
                    needs_approval: tool.needs_approval,
                })
                .collect(),
        }
    }

    fn handle(turn: wit::Turn) -> Result<(), String> {
        install_panic_hook();
        let tools = Rc::from(setup::<A>().tools);
        let mut turn = Turn::from_wit(turn, tools).map_err(|e| e.to_string())?;
        // A resumed turn answers its suspended step before `handle` sees it,
        // so no agent can leave a call of the step unanswered.
        let outcome = turn.run_resumed_step().and_then(|()| A::handle(&mut turn));
        match outcome {
            // A suspended turn is not an error: the host already knows.
            Ok(()) | Err(Error::ToolApprovalRequired(_)) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }
}

fn setup<A: Agent>() -> Setup {
    let mut setup = Setup::default();
    A::setup(&mut setup);
    setup
}

/// Installs, once per instance, a hook that hands each panic's message to
/// the host (`report-panic`) before the guest traps, then runs the previous hook.
fn install_panic_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            host::report_panic(&panic_message(info.payload(), info.location()));
            previous(info);
        }));
    });
}

/// `<message> (at <file>:<line>:<column>)`, the message first so it leads TURN_ERROR.
fn panic_message(payload: &dyn Any, location: Option<&Location<'_>>) -> String {
    let message = if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.as_str()
    } else {
        "panic with a non-text payload"
    };
    match location {
        Some(at) => format!("{message} (at {}:{}:{})", at.file(), at.line(), at.column()),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_messages_lead_with_the_message() {
        let here = Location::caller();
        let text = panic_message(&"boom", Some(here));
        assert!(text.starts_with("boom (at "), "{text}");
        assert!(text.contains("export.rs:"), "{text}");
        assert_eq!(panic_message(&String::from("owned"), None), "owned");
        assert_eq!(panic_message(&42_u8, None), "panic with a non-text payload");
    }
}
