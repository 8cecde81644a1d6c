//! Resuming a suspended step: on a turn whose reason is an approval decision,
//! the SDK runs the step the human decided on before `Agent::handle` sees the
//! turn, and keeps its results for `Turn::resumed` (and `Turn::pending_result`).
//! What the decision added (a message, a given result, the original of edited
//! arguments) it reads from the decision's event in the journal.

use serde_json::Value;

use crate::error::Error;
use crate::history::Event;
use crate::journal;
use crate::tools::{ToolCall, ToolResult, ToolStatus, report};
use crate::turn::{Decision, Turn};

/// Completes `decision` from its event (TOOL_APPROVAL_GRANTED or _DENIED
/// of the pending call; the last one, in case an id repeats): its message,
/// a given result and the original arguments. The WIT record says
/// `approved: false` when a result was given (so an SDK from before results
/// runs nothing); the event says it was approved.
fn complete(
    decision: &mut Decision,
    events: impl Iterator<Item = Result<Event, Error>>,
) -> Result<(), Error> {
    let pending = decision.call.id.clone();
    let mut found = None;
    for event in events {
        let event = event?;
        let this = match event.event_type.as_str() {
            journal::TOOL_APPROVAL_GRANTED => {
                event.payload_as::<journal::ToolApprovalGranted>().map(|g| {
                    (
                        g.tool_call_id,
                        g.message,
                        g.result,
                        g.original_arguments,
                        true,
                    )
                })
            }
            journal::TOOL_APPROVAL_DENIED => event
                .payload_as::<journal::ToolApprovalDenied>()
                .map(|d| (d.tool_call_id, d.message, Value::Null, Value::Null, false)),
            _ => None,
        };
        if let Some(decided) = this.filter(|d| Some(&d.0) == pending.as_ref()) {
            found = Some(decided);
        }
    }
    let Some((_, message, result, original_arguments, approved)) = found else {
        return Ok(());
    };
    let given = |value: Value| (!value.is_null()).then_some(value);
    decision.message = message;
    decision.result = given(result);
    decision.original_arguments = given(original_arguments);
    if approved {
        decision.approved = true;
    }
    Ok(())
}

/// What the resumed turn does with one call of the suspended step.
#[derive(Debug, Clone, PartialEq)]
enum Action {
    /// Run the call's handler.
    Run(ToolCall),
    /// Report the call `denied`, with this output.
    Deny(ToolCall, Value),
    /// Report the call `ok` with the result a human gave; it does not run.
    Answer(ToolCall, Value),
}

/// The suspended step's calls in their original order, each with what to do:
/// every call runs, except the pending one when it was denied (reported
/// `denied`, with the human's message if any) or answered by the human. A step that
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
            if call.id.as_deref() != pending {
                Action::Run(call)
            } else if let (true, Some(result)) = (decision.approved, &decision.result) {
                Action::Answer(call, result.clone())
            } else if !decision.approved {
                let output = match &decision.message {
                    Some(message) => format!("denied by {}: {message}", decision.approver),
                    None => format!("denied by {}", decision.approver),
                };
                Action::Deny(call, Value::String(output))
            } else {
                Action::Run(call)
            }
        })
        .collect()
}

impl Turn {
    /// Runs the suspended step of a turn resumed by an approval decision,
    /// before [`Agent::handle`](crate::Agent::handle) sees the turn (the
    /// SDK's `handle` export calls it, so no agent can forget it): in the
    /// order the agent proposed the calls, each ungated call runs its handler
    /// (`ok` or `error`); the pending (gated) call runs if approved (with the
    /// human's edited arguments, if any), is reported `ok` with the result a
    /// human gave in its place (it does not run), or is reported `denied`
    /// with the output `"denied by <approver>"` (`"denied by <approver>:
    /// <message>"` with a message). The decision's message, given result and
    /// original arguments are read from its event first ([`Decision`]). Each
    /// result is reported to the host as it comes (so a later handler sees
    /// the earlier results in [`Turn::history`]); all of them are kept for
    /// [`Turn::resumed`]. Does nothing on an input turn.
    pub(crate) fn run_resumed_step(&mut self) -> Result<(), Error> {
        if self.decision().is_none() {
            return Ok(());
        }
        let history = self.history();
        if let crate::turn::Reason::ApprovalDecision(decision) = &mut self.reason {
            complete(decision, history)?;
        }
        let Some(decision) = self.decision() else {
            return Ok(());
        };
        let plan = plan(decision);
        let mut results = Vec::with_capacity(plan.len());
        for action in plan {
            let call = match &action {
                Action::Run(call) | Action::Deny(call, _) | Action::Answer(call, _) => call,
            };
            if self.is_mcp_tool(&call.name) {
                // The host runs it (or answers it as the human decided) and
                // journals its result.
                let (id, name) = (call.id.clone().unwrap_or_default(), call.name.clone());
                results.push(self.call_mcp(id, name)?);
                continue;
            }
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
                Action::Answer(call, output) => ToolResult {
                    id: call.id.unwrap_or_default(),
                    name: call.name,
                    status: ToolStatus::Ok,
                    output,
                },
            };
            report(&result)?;
            results.push(result);
        }
        self.resumed = Some(results);
        Ok(())
    }

    /// On a turn resumed by an approval decision: the suspended step's
    /// results, in step order. The SDK ran the step before
    /// [`Agent::handle`](crate::Agent::handle) was called (the approved call
    /// ran, a denied one was reported `denied`), and they are in
    /// [`Turn::history`] too. `None` on an input turn.
    pub fn resumed(&self) -> Option<&[ToolResult]> {
        self.resumed.as_deref()
    }

    /// On a turn resumed by an approval decision: the result of the call the
    /// human decided on (one of [`Turn::resumed`]). `None` on an input turn.
    pub fn pending_result(&self) -> Option<&ToolResult> {
        let pending = self.decision()?.call.id.as_deref()?;
        self.resumed()?.iter().find(|r| r.id == pending)
    }

    /// The suspended step's results, as [`Turn::resumed`]: the SDK has
    /// already run the step before `handle`, so this runs nothing (calling
    /// it is harmless, any number of times). `None` on an input turn.
    #[deprecated(note = "the SDK runs the resumed step before `handle`: read `turn.resumed()`")]
    pub fn resume_step(&mut self) -> Result<Option<Vec<ToolResult>>, Error> {
        Ok(self.resumed().map(<[ToolResult]>::to_vec))
    }

    /// The pending call's result, as [`Turn::pending_result`]: the SDK has
    /// already run the step before `handle`, so this runs nothing. `None` on
    /// an input turn.
    #[deprecated(
        note = "the SDK runs the resumed step before `handle`: read `turn.pending_result()`"
    )]
    pub fn resume_pending_tool(&mut self) -> Result<Option<ToolResult>, Error> {
        Ok(self.pending_result().cloned())
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
            message: None,
            result: None,
            original_arguments: None,
        }
    }

    #[test]
    fn a_denial_carries_the_message_and_a_given_result_runs_nothing() {
        let step = vec![call("c1", "add"), call("c2", "delete")];
        let mut denied = decision(false, step.clone());
        denied.message = Some("not on Fridays".into());
        assert_eq!(
            plan(&denied)[1],
            Action::Deny(
                call("c2", "delete"),
                json!("denied by alice: not on Fridays")
            )
        );
        let mut answered = decision(true, step);
        answered.result = Some(json!({"deleted": false}));
        assert_eq!(
            plan(&answered),
            vec![
                Action::Run(call("c1", "add")),
                Action::Answer(call("c2", "delete"), json!({"deleted": false})),
            ]
        );
    }

    #[test]
    fn the_decision_is_completed_from_its_event() {
        let event = |seq, event_type: &str, payload: Value| {
            Ok(Event {
                seq,
                event_type: event_type.into(),
                payload,
            })
        };
        // The host says `approved: false` for a given result; the event says granted.
        let mut d = decision(false, vec![]);
        let events = vec![
            event(
                1,
                "TOOL_APPROVAL_GRANTED",
                json!({"tool_call_id": "other", "name": "delete", "approver": "ada",
                       "key_id": "k", "message": "no"}),
            ),
            event(
                2,
                "TOOL_APPROVAL_GRANTED",
                json!({"tool_call_id": "c2", "name": "delete", "approver": "ada", "key_id": "k",
                       "result": {"n": 1}, "message": "done by hand",
                       "original_arguments": {"name": "x"}}),
            ),
            event(3, "TURN_STARTED", json!({"turn": 2})),
        ];
        complete(&mut d, events.into_iter()).unwrap();
        assert!(d.approved);
        assert_eq!(d.result, Some(json!({"n": 1})));
        assert_eq!(d.message.as_deref(), Some("done by hand"));
        assert_eq!(d.original_arguments, Some(json!({"name": "x"})));
        // A plain decision adds nothing.
        let mut plain = decision(false, vec![]);
        let events = vec![event(
            1,
            "TOOL_APPROVAL_DENIED",
            json!({"tool_call_id": "c2", "name": "delete", "approver": "ada", "key_id": "k"}),
        )];
        complete(&mut plain, events.into_iter()).unwrap();
        assert_eq!(plain, decision(false, vec![]));
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
        assert_eq!(turn.run_resumed_step(), Ok(()));
        assert_eq!(turn.resumed(), None);
        assert_eq!(turn.pending_result(), None);
        #[allow(deprecated)]
        {
            assert_eq!(turn.resume_step(), Ok(None));
            assert_eq!(turn.resume_pending_tool(), Ok(None));
        }
    }

    #[test]
    fn the_old_helpers_return_what_the_sdk_ran_and_run_nothing() {
        let mut turn = Turn::for_tests();
        let step = vec![call("c1", "add"), call("c2", "delete")];
        turn.reason = crate::turn::Reason::ApprovalDecision(decision(false, step));
        let results = vec![
            ToolResult {
                id: "c1".into(),
                name: "add".into(),
                status: ToolStatus::Error,
                output: json!("unknown tool: add"),
            },
            ToolResult {
                id: "c2".into(),
                name: "delete".into(),
                status: ToolStatus::Denied,
                output: json!("denied by alice"),
            },
        ];
        turn.resumed = Some(results.clone());
        assert_eq!(turn.resumed(), Some(&results[..]));
        assert_eq!(turn.pending_result(), Some(&results[1]));
        #[allow(deprecated)]
        for _ in 0..2 {
            assert_eq!(turn.resume_step(), Ok(Some(results.clone())));
            assert_eq!(turn.resume_pending_tool(), Ok(Some(results[1].clone())));
        }
    }
}
