//! Resuming a suspended step: on a turn whose reason is an approval decision,
//! `Turn::resume_step` runs the step the human decided on (and
//! `Turn::resume_pending_tool` returns just the gated call's result).

use serde_json::Value;

use crate::error::Error;
use crate::tools::{ToolCall, ToolResult, ToolStatus, report};
use crate::turn::{Decision, Turn};

/// What the resumed turn does with one call of the suspended step.
#[derive(Debug, Clone, PartialEq)]
enum Action {
    /// Run the call's handler.
    Run(ToolCall),
    /// Report the call `denied`, with this output.
    Deny(ToolCall, Value),
}

/// The suspended step's calls in their original order, each with what to do:
/// every call runs, except the pending one when it was denied. A step that
/// does not list the pending call (a host that sends none) gets it at the
/// end, so it is answered all the same.
fn plan(decision: &Decision) -> Vec<Action> {
    let pending = decision.call.id.as_deref();
    let mut step = decision.step.clone();
    if !step.iter().any(|call| call.id.as_deref() == pending) {
        step.push(decision.call.clone());
    }
    step.into_iter()
        .map(|call| {
            if call.id.as_deref() == pending && !decision.approved {
                let output = Value::String(format!("denied by {}", decision.approver));
                Action::Deny(call, output)
            } else {
                Action::Run(call)
            }
        })
        .collect()
}

impl Turn {
    /// On a turn resumed by an approval decision, runs the suspended step in
    /// the order the agent proposed it: each ungated call runs its handler
    /// (`ok` or `error`); the pending (gated) call runs if approved, or is
    /// reported `denied` with the output `"denied by <approver>"`. Each
    /// result is reported to the host as it comes (so a later handler sees
    /// the earlier results in [`Turn::history`]).
    ///
    /// Returns every result in step order; `None` when the turn's reason is
    /// an input, or when the step already ran in this turn (it never runs twice).
    pub fn resume_step(&mut self) -> Result<Option<Vec<ToolResult>>, Error> {
        if self.step_resumed {
            return Ok(None);
        }
        let Some(decision) = self.decision() else {
            return Ok(None);
        };
        let plan = plan(decision);
        self.step_resumed = true;
        let mut results = Vec::with_capacity(plan.len());
        for action in plan {
            let result = match action {
                Action::Run(call) => {
                    let id = call.id.clone().unwrap_or_default();
                    self.invoke(id, call)
                }
                Action::Deny(call, output) => ToolResult {
                    id: call.id.unwrap_or_default(),
                    name: call.name,
                    status: ToolStatus::Denied,
                    output,
                },
            };
            report(&result)?;
            results.push(result);
        }
        Ok(Some(results))
    }

    /// A convenience over [`Turn::resume_step`]: runs the whole suspended
    /// step (the ungated calls too, as the host requires) and returns only
    /// the pending call's result. `None` when the turn's reason is an input
    /// or the step already ran in this turn.
    pub fn resume_pending_tool(&mut self) -> Result<Option<ToolResult>, Error> {
        let Some(pending) = self.decision().and_then(|d| d.call.id.clone()) else {
            return Ok(None);
        };
        let results = self.resume_step()?;
        Ok(results.and_then(|all| all.into_iter().find(|r| r.id == pending)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall::new(name, json!({"name": id})).with_id(id)
    }

    fn decision(approved: bool, step: Vec<ToolCall>) -> Decision {
        Decision {
            approved,
            approver: "alice".into(),
            call: call("c2", "delete"),
            step,
        }
    }

    #[test]
    fn an_approved_step_runs_every_call_in_order() {
        let step = vec![call("c1", "add"), call("c2", "delete"), call("c3", "add")];
        let actions = plan(&decision(true, step.clone()));
        assert_eq!(
            actions,
            step.into_iter().map(Action::Run).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_denied_step_runs_the_others_and_denies_the_pending_call() {
        let step = vec![call("c1", "add"), call("c2", "delete"), call("c3", "add")];
        let actions = plan(&decision(false, step));
        assert_eq!(
            actions,
            vec![
                Action::Run(call("c1", "add")),
                Action::Deny(call("c2", "delete"), json!("denied by alice")),
                Action::Run(call("c3", "add")),
            ]
        );
    }

    #[test]
    fn a_step_without_the_pending_call_still_answers_it() {
        assert_eq!(
            plan(&decision(true, Vec::new())),
            vec![Action::Run(call("c2", "delete"))]
        );
        let actions = plan(&decision(false, vec![call("c1", "add")]));
        assert_eq!(actions.len(), 2);
        assert!(matches!(&actions[1], Action::Deny(c, _) if c.id.as_deref() == Some("c2")));
    }

    #[test]
    fn input_turns_have_no_step_to_resume() {
        let mut turn = Turn::for_tests();
        assert_eq!(turn.resume_step(), Ok(None));
        assert_eq!(turn.resume_pending_tool(), Ok(None));
    }
}
