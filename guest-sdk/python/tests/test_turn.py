"""Turns, tools, the resumed step's plan, history paging and how failures
read (the Rust SDK's turn.rs, tools.rs, resume.rs, history.rs and export.rs cases)."""

import types
import unittest

from agenthost import Agent, AgentError, BadInput, HostError, ToolCall, ToolStatus, Turn
from agenthost._export import failure_message, find_agent
from agenthost.history import EndUser, Event, History, read_end_user
from agenthost.resume import complete, plan, resume_step
from agenthost.tools import call_id, invoke
from agenthost.turn import Decision, input_text


def call(id, name):
    return ToolCall(name, {"name": id}, id=id)


def decision(approved, step):
    return Decision(approved=approved, approver="alice", call=call("c2", "delete"), step=step)


class TurnTest(unittest.TestCase):
    def test_input_text_reads_strings_and_text_fields(self):
        self.assertEqual(input_text("hello"), "hello")
        self.assertEqual(input_text({"text": "hi", "x": 1}), "hi")
        self.assertIsNone(input_text({"text": 3}))
        self.assertIsNone(input_text({"sleep_ms": 5}))
        self.assertIsNone(input_text(["a"]))

    def test_turns_parse_their_input(self):
        turn = Turn("s", 2, "/chat", '{"text":"go"}', None, {})
        self.assertEqual(turn.input_text, "go")
        self.assertEqual(turn.reason, "input")
        with self.assertRaises(BadInput) as caught:
            Turn("s", 1, "/chat", "not json", None, {})
        self.assertTrue(str(caught.exception).startswith("bad input: the turn's input is not JSON"))

    def test_generated_ids_name_the_turn_and_count_from_one(self):
        self.assertEqual(call_id(3, 1), "call_3_1")
        self.assertNotEqual(call_id(1, 12), call_id(11, 2))
        turn = Turn("s", 4, "/chat", "null", None, {})
        self.assertEqual([turn._next_call_id(), turn._next_call_id()], ["call_4_1", "call_4_2"])

    def test_tools_report_errors_as_results(self):
        agent = Agent(routes=["/x"])

        @agent.tool
        def count(turn: Turn, text: str) -> int:
            if text == "boom":
                raise ValueError("no good")
            return len(text)

        @agent.tool
        def odd() -> object:
            return object()

        turn = Turn("s", 1, "/x", "null", None, agent.tools)
        ok = invoke(turn, "c1", ToolCall("count", {"text": "four"}))
        self.assertEqual((ok.status, ok.output), (ToolStatus.OK, 4))
        bad = invoke(turn, "c2", ToolCall("count", {"txt": 1}))
        self.assertEqual(bad.status, ToolStatus.ERROR)
        self.assertTrue(bad.output.startswith("invalid arguments"), bad.output)
        self.assertEqual(invoke(turn, "c3", ToolCall("count", {"text": "boom"})).output, "no good")
        self.assertEqual(invoke(turn, "c4", ToolCall("nope", {})).output, "unknown tool: nope")
        self.assertTrue(invoke(turn, "c5", ToolCall("odd", {})).output.startswith("invalid output"))
        self.assertEqual(ToolCall._from_wire("c1", "t", "{not json").arguments, "{not json")

    def test_tool_statuses_format_as_their_values(self):
        self.assertEqual(f"{ToolStatus.DENIED}", "denied")
        self.assertEqual(str(ToolStatus.OK), "ok")
        self.assertEqual(f"[{ToolStatus.ERROR:>6}]", "[ error]")
        self.assertEqual(ToolStatus.DENIED, "denied")
        self.assertEqual([s.value for s in ToolStatus], ["ok", "error", "denied"])

    def test_an_approved_step_runs_every_call_in_order(self):
        step = [call("c1", "add"), call("c2", "delete"), call("c3", "add")]
        self.assertEqual(plan(decision(True, step)), [("run", c) for c in step])

    def test_a_denied_step_runs_the_others_and_denies_the_pending_call(self):
        step = [call("c1", "add"), call("c2", "delete"), call("c3", "add")]
        self.assertEqual(
            plan(decision(False, step)),
            [("run", call("c1", "add")), ("deny", call("c2", "delete")), ("run", call("c3", "add"))],
        )

    def test_a_step_without_the_pending_call_still_answers_it(self):
        self.assertEqual(plan(decision(True, [])), [("run", call("c2", "delete"))])
        actions = plan(decision(False, [call("c1", "add")]))
        self.assertEqual(actions[1], ("deny", call("c2", "delete")))

    def test_a_denial_carries_the_message_and_a_given_result_runs_nothing(self):
        step = [call("c1", "add"), call("c2", "delete")]
        answered = decision(True, step)
        answered.result = {"deleted": False}
        self.assertEqual(plan(answered), [("run", step[0]), ("answer", step[1])])
        self.assertEqual(plan(decision(False, step))[1], ("deny", step[1]))

    def test_the_decision_is_completed_from_its_event(self):
        d = decision(False, [])
        complete(
            d,
            [
                Event(1, "TOOL_APPROVAL_GRANTED", {"tool_call_id": "other", "message": "no"}),
                Event(
                    2,
                    "TOOL_APPROVAL_GRANTED",
                    {"tool_call_id": "c2", "result": {"n": 1}, "message": "by hand",
                     "original_arguments": {"name": "x"}},
                ),
                Event(3, "TURN_STARTED", {"turn": 2}),
            ],
        )
        self.assertTrue(d.approved)
        self.assertEqual((d.result, d.message, d.original_arguments), ({"n": 1}, "by hand", {"name": "x"}))
        plain = decision(False, [])
        complete(plain, [Event(1, "TOOL_APPROVAL_DENIED", {"tool_call_id": "c2"})])
        self.assertEqual(plain, decision(False, []))

    def test_a_step_already_resumed_is_not_run_again(self):
        turn = Turn("s", 2, "/chat", '"go"', decision(True, [call("c2", "delete")]), {})
        self.assertEqual(resume_step(Turn("s", 1, "/chat", '"go"', None, {})), [])
        done = [invoke(turn, "c2", call("c2", "delete"))]
        turn.resumed = done
        # Runs nothing (the host would refuse a second result): the same results.
        self.assertIs(resume_step(turn), done)
        self.assertIs(turn.pending_result, done[0])

    def test_history_pages_are_read_in_order_until_the_last(self):
        def journal(n, per_page):
            events = [
                Event(seq, "MESSAGE_END", {"message_id": f"m{seq}", "role": "user" if seq % 2 else "assistant", "text": f"t{seq}"})
                for seq in range(1, n + 1)
            ]

            def read(after, limit):
                rest = [e for e in events if after is None or e.seq > after][:per_page]
                last = rest[-1].seq if rest else None
                return rest, (last if last is not None and last < n else None)

            return History(read)

        self.assertEqual([e.seq for e in journal(7, 3)], [1, 2, 3, 4, 5, 6, 7])
        self.assertEqual(list(journal(0, 3)), [])
        messages = journal(3, 2).messages()
        self.assertEqual([m.role for m in messages], ["user", "assistant", "user"])
        self.assertEqual(messages[2].text, "t3")
        stuck = History(lambda after, limit: ([], after if after is not None else 0))
        self.assertEqual(list(stuck), [])

        def failing(after, limit):
            raise HostError("unavailable", "storage down")

        history = History(failing)
        with self.assertRaises(HostError):
            next(history)
        self.assertEqual(list(history), [])

    def test_the_end_user_and_claims_come_from_session_created(self):
        asked = []

        def first_is(payload, event_type="SESSION_CREATED"):
            def read(after, limit):
                asked.append((after, limit))
                return [Event(0, event_type, payload)], 0

            return read

        created = {"app": "shop", "route": "/chat", "input": "hi",
                   "end_user": {"id": "ada", "claims": {"email": "ada@example.com", "plan": "pro"}}}
        user = read_end_user(first_is(created))
        self.assertEqual(user, EndUser("ada", {"email": "ada@example.com", "plan": "pro"}))
        # One read: the first event alone.
        self.assertEqual(asked, [(None, 1)])
        # No claims listed: the journal leaves `claims` out.
        self.assertEqual(read_end_user(first_is({"end_user": {"id": "bob"}})), EndUser("bob", {}))
        # A session created with a key has none.
        self.assertIsNone(read_end_user(first_is({"app": "shop", "input": None})))
        # An unexpected journal is an error, as is the host's.
        for bad in [
            first_is({}, "TURN_STARTED"),
            first_is({"end_user": {"id": 7}}),
            first_is({"end_user": {"id": "ada", "claims": ["email"]}}),
            first_is({"end_user": "ada"}),
            lambda after, limit: ([], None),
        ]:
            with self.assertRaises(AgentError):
                read_end_user(bad)

        def failing(after, limit):
            raise HostError("unavailable", "storage down")

        with self.assertRaises(HostError):
            read_end_user(failing)

    def test_failures_read_well_in_turn_error(self):
        self.assertEqual(failure_message(AgentError("agent said no")), "agent said no")
        self.assertEqual(
            failure_message(HostError("closed", "session ended")),
            "the host refused an effect: closed: session ended",
        )

        def handler():
            raise ValueError("boom")

        try:
            handler()
        except ValueError as error:
            text = failure_message(error)
        lines = text.splitlines()
        self.assertEqual(lines[0], "ValueError: boom")
        self.assertEqual(lines[1], "Traceback (most recent call last):")
        self.assertIn("in handler", text)

    def test_the_module_must_define_one_agent_with_a_route_and_a_handler(self):
        module = types.ModuleType("app")
        with self.assertRaises(TypeError) as caught:
            find_agent(module)
        self.assertIn("must define an agent", str(caught.exception))
        module.agent = Agent()
        with self.assertRaises(TypeError) as caught:
            find_agent(module)
        self.assertIn("no route", str(caught.exception))
        module.agent.route("/chat")
        with self.assertRaises(TypeError) as caught:
            find_agent(module)
        self.assertIn("no handler", str(caught.exception))
        module.agent.handler(lambda turn: None)
        self.assertIs(find_agent(module), module.agent)
        with self.assertRaises(ValueError):
            module.agent.route("chat")
        with self.assertRaises(ValueError):
            module.agent.route("/chat")


if __name__ == "__main__":
    unittest.main()
