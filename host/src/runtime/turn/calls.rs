//! A turn's call and message bookkeeping (`Calls`): the messages it has
//! open, the tool calls waiting for their result (with their arguments,
//! for an MCP call), the ids the session has used, and in a resumed turn
//! the human's decision on the suspended call. The order rules of
//! `host.rs` ask it; it knows nothing of the journal.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::store::{ToolCallRecord, TurnReason};

#[derive(Default)]
pub(super) struct Calls {
    /// Open messages: id → text so far.
    open_messages: Vec<(String, String)>,
    /// Tool calls of this turn still waiting for their result: id → name.
    pending: HashMap<String, String>,
    /// The arguments of the calls waiting for their result: id → arguments
    /// (an MCP call is sent with them).
    arguments: HashMap<String, Value>,
    /// Every tool call id this turn has seen (proposed or resumed), and
    /// once `earlier_read`, those of the session's earlier turns.
    seen: HashSet<String>,
    earlier_read: bool,
    /// In a resumed turn: the pending call a human denied (its only valid result is `denied`).
    denied: Option<String>,
    /// In a resumed turn: the denied call's output, `denied by <approver>[: <message>]`.
    denial: Option<String>,
    /// In a resumed turn: the pending call a human answered in place of the
    /// tool, and the result given; its valid results are `ok` with exactly
    /// that output, or `denied` (from an SDK that predates given results).
    answered: Option<(String, Value)>,
}

impl Calls {
    /// A turn's bookkeeping at its start: a resumed turn waits for the
    /// results of the suspended step, each once.
    pub(super) fn at_start(reason: &TurnReason) -> Calls {
        let mut calls = Calls::default();
        if let TurnReason::ApprovalDecision {
            approved,
            approver,
            pending,
            details,
        } = reason
        {
            if let Some(result) = &details.result {
                calls.answered = Some((pending.call.tool_call_id.clone(), result.clone()));
            }
            calls.wait_for(&pending.step);
            calls.seen = calls.pending.keys().cloned().collect();
            if !approved {
                calls.denied = Some(pending.call.tool_call_id.clone());
                calls.denial = Some(match &details.message {
                    Some(message) => format!("denied by {approver}: {message}"),
                    None => format!("denied by {approver}"),
                });
            }
        }
        calls
    }

    // Messages.

    pub(super) fn open_message_count(&self) -> usize {
        self.open_messages.len()
    }

    pub(super) fn open_message(&mut self, id: String) {
        self.open_messages.push((id, String::new()));
    }

    /// Where the open message `id` is, if it is open.
    pub(super) fn message(&self, id: &str) -> Option<usize> {
        self.open_messages.iter().position(|(open, _)| open == id)
    }

    /// Bytes of text the open message at `index` holds.
    pub(super) fn message_len(&self, index: usize) -> usize {
        self.open_messages[index].1.len()
    }

    pub(super) fn append_text(&mut self, index: usize, text: &str) {
        self.open_messages[index].1.push_str(text);
    }

    /// Closes the open message at `index`: its id and full text.
    pub(super) fn close_message(&mut self, index: usize) -> (String, String) {
        self.open_messages.remove(index)
    }

    /// Every message still open (closed now), in the order they opened.
    pub(super) fn take_open_messages(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.open_messages)
    }

    // Tool calls.

    /// Whether the session's earlier calls are among `seen` yet.
    pub(super) fn earlier_read(&self) -> bool {
        self.earlier_read
    }

    /// One of the session's earlier call ids, read once per turn
    /// (`TurnCtx::remember_earlier_calls`).
    pub(super) fn remember_earlier(&mut self, id: String) {
        self.seen.insert(id);
    }

    pub(super) fn earlier_done(&mut self) {
        self.earlier_read = true;
    }

    /// Whether the session has used the id `id` already.
    pub(super) fn is_seen(&self, id: &str) -> bool {
        self.seen.contains(id)
    }

    /// The step's calls are journaled: their ids are used.
    pub(super) fn see(&mut self, step: &[ToolCallRecord]) {
        self.seen
            .extend(step.iter().map(|c| c.tool_call_id.clone()));
    }

    /// The step runs: each call waits for its result.
    pub(super) fn wait_for(&mut self, step: &[ToolCallRecord]) {
        for call in step {
            (self.pending).insert(call.tool_call_id.clone(), call.name.clone());
            (self.arguments).insert(call.tool_call_id.clone(), call.arguments.clone());
        }
    }

    /// The tool name of the call `id`, if it waits for its result.
    pub(super) fn pending(&self, id: &str) -> Option<&String> {
        self.pending.get(id)
    }

    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The ids of the calls still waiting for a result, sorted.
    pub(super) fn unanswered(&self) -> Vec<&String> {
        let mut ids: Vec<&String> = self.pending.keys().collect();
        ids.sort();
        ids
    }

    /// The call `id` has its result.
    pub(super) fn answer(&mut self, id: &str) {
        self.pending.remove(id);
    }

    /// The call `id`'s arguments, while it waits for its result.
    pub(super) fn arguments(&self, id: &str) -> Option<&Value> {
        self.arguments.get(id)
    }

    pub(super) fn forget_arguments(&mut self, id: &str) {
        self.arguments.remove(id);
    }

    /// Whether a human denied the call `id` (this turn resumes it).
    pub(super) fn is_denied(&self, id: &str) -> bool {
        self.denied.as_deref() == Some(id)
    }

    /// The denied call's output: `denied by <approver>[: <message>]`.
    pub(super) fn denial(&self) -> Option<&String> {
        self.denial.as_ref()
    }

    /// The result a human gave for the call `id` in place of the tool.
    pub(super) fn given_result(&self, id: &str) -> Option<&Value> {
        (self.answered.as_ref())
            .filter(|(answered, _)| answered == id)
            .map(|(_, given)| given)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::{DecisionDetails, PendingApproval};

    fn call(id: &str, name: &str) -> ToolCallRecord {
        ToolCallRecord {
            tool_call_id: id.into(),
            name: name.into(),
            arguments: json!({"id": id}),
        }
    }

    fn resumed(approved: bool, details: DecisionDetails) -> TurnReason {
        TurnReason::ApprovalDecision {
            approved,
            approver: "alice".into(),
            pending: Box::new(PendingApproval {
                call: call("c1", "rm"),
                reason: None,
                gated_by: vec!["code".into()],
                step: vec![call("c1", "rm"), call("c2", "ls")],
                input: json!("go"),
                event_seq: 0,
                expires_at: None,
            }),
            details: Box::new(details),
        }
    }

    #[test]
    fn a_resumed_turn_waits_for_its_steps_results_and_knows_the_decision() {
        let details = DecisionDetails {
            message: Some("too big".into()),
            ..Default::default()
        };
        let mut calls = Calls::at_start(&resumed(false, details));
        assert_eq!(calls.unanswered(), ["c1", "c2"]);
        assert!(calls.is_seen("c1") && calls.is_seen("c2") && !calls.is_seen("c3"));
        assert!(calls.is_denied("c1") && !calls.is_denied("c2"));
        assert_eq!(
            calls.denial().map(String::as_str),
            Some("denied by alice: too big")
        );
        assert_eq!(calls.arguments("c2"), Some(&json!({"id": "c2"})));
        assert_eq!(calls.given_result("c1"), None);
        calls.answer("c1");
        calls.forget_arguments("c2");
        assert_eq!(calls.pending("c2").map(String::as_str), Some("ls"));
        assert_eq!(calls.arguments("c2"), None);
        assert_eq!(calls.unanswered(), ["c2"]);

        let given = DecisionDetails {
            result: Some(json!({"done": true})),
            ..Default::default()
        };
        let calls = Calls::at_start(&resumed(true, given));
        assert_eq!(calls.given_result("c1"), Some(&json!({"done": true})));
        assert_eq!(calls.given_result("c2"), None);
        assert!(!calls.is_denied("c1") && calls.denial().is_none());
    }

    #[test]
    fn a_new_turn_starts_with_nothing_open_or_pending() {
        let mut calls = Calls::at_start(&TurnReason::Input);
        assert!(!calls.has_pending() && !calls.is_seen("c1") && !calls.earlier_read());
        calls.open_message("m1".into());
        calls.open_message("m2".into());
        let m2 = calls.message("m2").expect("open");
        calls.append_text(m2, "hello");
        assert_eq!(calls.message_len(m2), 5);
        assert_eq!(calls.close_message(m2), ("m2".into(), "hello".into()));
        assert_eq!(calls.message("m2"), None);
        assert_eq!(calls.open_message_count(), 1);
        assert_eq!(calls.take_open_messages(), [("m1".into(), String::new())]);
        calls.see(&[call("c1", "rm")]);
        calls.remember_earlier("c0".into());
        calls.earlier_done();
        assert!(calls.is_seen("c0") && calls.is_seen("c1") && calls.earlier_read());
        assert!(!calls.has_pending());
    }
}
