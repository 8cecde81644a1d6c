//! The `Agent` trait and `Setup`, where an agent declares its routes and
//! tools; the host's `describe` is derived from it.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::Error;
use crate::tools::{Tool, erase};
use crate::turn::Turn;

/// The parameters-schema keyword by which a tool's code names who may
/// decide its calls ([`ToolBuilder::end_user_approves`]).
pub(crate) const APPROVER_KEYWORD: &str = "x-agenthost-approver";

/// An agent. Implement it on a unit struct and export it with
/// [`export_agent!`](crate::export_agent).
///
/// ```no_run
/// struct Echo;
///
/// impl agenthost_sdk::Agent for Echo {
///     fn setup(agent: &mut agenthost_sdk::Setup) {
///         agent.route("/echo");
///     }
///
///     fn handle(turn: &mut agenthost_sdk::Turn) -> Result<(), agenthost_sdk::Error> {
///         turn.say(turn.input_text().unwrap_or(""))
///     }
/// }
///
/// agenthost_sdk::export_agent!(Echo);
/// ```
pub trait Agent {
    /// Declares the agent's routes and tools. It runs for `describe` (at
    /// deploy time, with only `SERVICE_MANIFEST=1` in the environment) and at
    /// the start of every turn, so it must be cheap and always declare the same.
    fn setup(agent: &mut Setup);

    /// Handles one turn. `Err` ends the turn with a TURN_ERROR carrying the
    /// error's message, except [`Error::ToolApprovalRequired`], which ends it
    /// cleanly (the host has suspended it).
    ///
    /// On a turn resumed by an approval decision, the SDK has already run
    /// the suspended step when `handle` is called: its results are
    /// [`Turn::resumed`] (and in [`Turn::history`]).
    fn handle(turn: &mut Turn) -> Result<(), Error>;
}

/// What an agent declares: its routes and its tools.
#[derive(Default)]
pub struct Setup {
    pub(crate) routes: Vec<String>,
    pub(crate) tools: Vec<Tool>,
}

/// Adjusts a tool just registered with [`Setup::tool`].
pub struct ToolBuilder<'a> {
    tool: &'a mut Tool,
}

impl Setup {
    /// Serves the agent on `path`, such as `/chat` (starts with `/`, unique).
    pub fn route(&mut self, path: impl Into<String>) -> &mut Self {
        self.routes.push(path.into());
        self
    }

    /// Registers a tool: `name` (`[A-Za-z0-9_-]{1,64}`, unique), a
    /// description, the JSON Schema of its arguments, and its handler.
    ///
    /// The handler gets the arguments deserialized into `T` (use
    /// [`serde_json::Value`] to take them as they are); arguments that do not
    /// fit, and `Err` messages, become a tool result with status `error`.
    pub fn tool<T, R, F>(
        &mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        handler: F,
    ) -> ToolBuilder<'_>
    where
        T: DeserializeOwned,
        R: Serialize,
        F: Fn(&mut Turn, T) -> Result<R, String> + 'static,
    {
        self.tools.push(Tool {
            name: name.into(),
            description: description.into(),
            parameters,
            needs_approval: false,
            handler: erase(handler),
        });
        let last = self.tools.len() - 1;
        ToolBuilder {
            tool: &mut self.tools[last],
        }
    }
}

impl ToolBuilder<'_> {
    /// Gates the tool: each call waits for a human decision before it runs.
    pub fn needs_approval(self) -> Self {
        self.tool.needs_approval = true;
        self
    }

    /// Lets the session's own end user decide this tool's calls (as the
    /// manifest's `[tools.<name>] approver = "end_user"` does); operators
    /// still may. It matters where the tool is gated: here with
    /// [`ToolBuilder::needs_approval`], in the manifest, or by the
    /// operator's policy. Written into the parameters schema as
    /// `"x-agenthost-approver": "end_user"`, which the host reads at deploy
    /// (docs/end-users.md).
    pub fn end_user_approves(self) -> Self {
        if let Value::Object(schema) = &mut self.tool.parameters {
            schema.insert(APPROVER_KEYWORD.into(), Value::from("end_user"));
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(_: &mut Turn, arguments: Value) -> Result<Value, String> {
        Ok(arguments)
    }

    #[test]
    fn end_user_approves_marks_the_tools_schema_and_only_its() {
        let mut setup = Setup {
            routes: Vec::new(),
            tools: Vec::new(),
        };
        let schema = serde_json::json!({"type": "object"});
        (setup.tool("mine", "", schema.clone(), echo))
            .needs_approval()
            .end_user_approves();
        setup.tool("theirs", "", schema, echo).needs_approval();
        assert_eq!(setup.tools[0].parameters[APPROVER_KEYWORD], "end_user");
        assert!(setup.tools[0].needs_approval);
        assert_eq!(setup.tools[1].parameters.get(APPROVER_KEYWORD), None);
    }
}
