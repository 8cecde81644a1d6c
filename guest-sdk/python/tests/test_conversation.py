"""The model's conversation rebuilt from the journal (the Rust SDK's conversation.rs cases)."""

import unittest

from agenthost.history import Event
from agenthost.llm.conversation import NO_RESULT, rebuild


def journal(events):
    return [Event(seq, kind, payload) for seq, (kind, payload) in enumerate(events)]


def started(turn, value):
    return ("TURN_STARTED", {"turn": turn, "reason": {"kind": "input"}, "input": value})


def message(role, text):
    return ("MESSAGE_END", {"message_id": "msg_1", "role": role, "text": text})


def call(id, name, arguments):
    return ("TOOL_CALL", {"tool_call_id": id, "name": name, "arguments": arguments})


def result(id, status, output):
    return ("TOOL_RESULT", {"tool_call_id": id, "name": "t", "status": status, "output": output})


def lifecycle(kind):
    return (kind, {"method": "POST", "origin": "http://x", "status": 200})


def call_ref(id, name, arguments):
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


class ConversationTest(unittest.TestCase):
    def test_a_conversation_with_tools_across_turns(self):
        events = journal(
            [
                ("SESSION_CREATED", {"input": "where is A1?"}),
                started(1, "where is A1?"),
                ("MESSAGE_START", {"message_id": "m", "role": "user"}),
                message("user", "where is A1?"),
                lifecycle("HTTP_REQUEST"),
                lifecycle("HTTP_RESPONSE"),
                message("assistant", "Let me look."),
                call("call_1_1", "lookup_order", {"order_id": "A1"}),
                call("call_1_2", "lookup_order", {"order_id": "B2"}),
                result("call_1_1", "ok", {"status": "shipped"}),
                result("call_1_2", "error", "no such order"),
                lifecycle("HTTP_REQUEST"),
                message("assistant", "A1 has shipped."),
                ("TURN_ENDED", {"turn": 1}),
                started(2, {"text": "thanks"}),
                message("user", "thanks"),
            ]
        )
        self.assertEqual(
            rebuild("Be brief.", events),
            [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "where is A1?"},
                {
                    "role": "assistant",
                    "content": "Let me look.",
                    "tool_calls": [
                        call_ref("call_1_1", "lookup_order", '{"order_id":"A1"}'),
                        call_ref("call_1_2", "lookup_order", '{"order_id":"B2"}'),
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1_1", "content": '{"status":"shipped"}'},
                {"role": "tool", "tool_call_id": "call_1_2", "content": "error: no such order"},
                {"role": "assistant", "content": "A1 has shipped."},
                {"role": "user", "content": "thanks"},
            ],
        )

    def test_a_suspended_step_and_its_denied_call(self):
        events = journal(
            [
                started(1, "refund A1"),
                message("user", "refund A1"),
                call("call_1_1", "refund_order", {"order_id": "A1"}),
                ("TOOL_APPROVAL_REQUIRED", {"tool_call_id": "call_1_1", "name": "refund_order"}),
                ("TOOL_APPROVAL_DENIED", {"tool_call_id": "call_1_1", "approver": "alice"}),
                (
                    "TURN_STARTED",
                    {"turn": 2, "reason": {"kind": "approval_decision", "approved": False}, "input": "refund A1"},
                ),
                result("call_1_1", "denied", "denied by alice"),
            ]
        )
        self.assertEqual(
            rebuild("", events),
            [
                {"role": "user", "content": "refund A1"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [call_ref("call_1_1", "refund_order", '{"order_id":"A1"}')],
                },
                {
                    "role": "tool",
                    "tool_call_id": "call_1_1",
                    "content": "denied: a human reviewer denied this call, so it did not run (denied by alice)",
                },
            ],
        )

    def test_calls_without_results_are_answered_so_the_conversation_stays_valid(self):
        events = journal(
            [
                started(1, "refund both"),
                message("user", "refund both"),
                call("call_1_1", "refund_order", {"order_id": "A1"}),
                call("call_1_2", "refund_order", {"order_id": "B2"}),
                ("TURN_ERROR", {"turn": 1, "kind": "multiple_gated_calls"}),
                started(2, "just A1 then"),
                message("user", "just A1 then"),
                call("call_2_1", "lookup_order", "{broken"),
            ]
        )
        messages = rebuild("", events)
        tools = [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]
        self.assertEqual(tools, [("call_1_1", NO_RESULT), ("call_1_2", NO_RESULT), ("call_2_1", NO_RESULT)])
        self.assertEqual(messages[3]["role"], "tool")
        self.assertEqual(messages[4], {"role": "user", "content": "just A1 then"})
        self.assertEqual(messages[5]["tool_calls"][0]["function"]["arguments"], "{broken")

    def test_steps_after_results_are_new_assistant_messages_and_inputs_without_text_are_json(self):
        events = journal(
            [
                started(1, {"order": "A1"}),
                call("call_1_1", "lookup_order", {"order_id": "A1"}),
                result("call_1_1", "ok", "shipped"),
                call("call_1_2", "refund_order", {"order_id": "A1"}),
                result("call_1_2", "ok", {"refunded": True}),
                started(2, None),
                message("assistant", ""),
                ("SOMETHING_NEW", {"x": 1}),
            ]
        )
        messages = rebuild("", events)
        self.assertEqual(messages[0], {"role": "user", "content": '{"order":"A1"}'})
        self.assertEqual(len(messages[1]["tool_calls"]), 1)
        self.assertEqual(messages[2], {"role": "tool", "tool_call_id": "call_1_1", "content": "shipped"})
        self.assertEqual(messages[3]["tool_calls"][0]["id"], "call_1_2")
        self.assertEqual(len(messages), 5)


if __name__ == "__main__":
    unittest.main()
