"""The model loop over declared models (``[llm.<alias>]``): the alias it
picks, the text it leaves to the host, the calls it hands over, and a
``closed`` host error that ends the run quietly. The host's ``llm`` imports
are replaced by fakes (they exist only inside a component)."""

import json
import unittest

from agenthost import _host
from agenthost.errors import HostError
from agenthost.llm import ChatLoop, ConfigError, DeclaredModelFailed, ModelConfig, declared_models
from agenthost.tools import Tool
from agenthost.turn import Turn


def done(text="", calls=(), finish="stop"):
    """A completion as ``_host.llm_complete`` returns it."""
    return (None if not text else "msg_1", text, list(calls), finish, "main", 10, 3)


class FakeTurn(Turn):
    def __init__(self):
        tools = {"echo": Tool("echo", "Returns its arguments.", {"type": "object"}, False, lambda **a: a, [], {}, [], True, False)}
        super().__init__("s", 1, "/chat", '"hi"', None, tools)
        self._mcp_tools = []
        self.steps = []

    def history(self):
        return []

    def message(self):
        raise AssertionError("the host streams a declared model's text: the loop must not write it")

    def run_tools(self, calls, reason=None):
        self.steps.append(([(c.name, c.arguments) for c in calls], reason))
        return []


class DeclaredTest(unittest.TestCase):
    def setUp(self):
        self.saved = (_host.llm_aliases, _host.llm_complete)
        self.asked = []
        self.replies = []
        _host.llm_aliases = lambda: ["backup", "main"]

        def complete(alias, messages, tools, parameters):
            self.asked.append((alias, json.loads(messages), json.loads(tools), json.loads(parameters)))
            reply = self.replies.pop(0)
            if isinstance(reply, BaseException):
                raise reply
            return reply

        _host.llm_complete = complete

    def tearDown(self):
        _host.llm_aliases, _host.llm_complete = self.saved

    def test_the_loop_calls_main_hands_over_the_calls_and_writes_no_text(self):
        self.replies = [done("Let me look.", [("p1", "echo", '{"x":1}')], "tool_calls"), done("Hello")]
        turn = FakeTurn()
        ChatLoop("Be brief.").run(turn)
        self.assertEqual([a[0] for a in self.asked], ["main", "main"])
        alias, messages, tools, parameters = self.asked[0]
        self.assertEqual(messages, [{"role": "system", "content": "Be brief."}])
        self.assertEqual(tools[0]["function"]["name"], "echo")
        self.assertEqual(parameters, {})
        self.assertEqual(turn.steps, [([("echo", {"x": 1})], "Let me look.")])
        self.assertEqual(declared_models(), ["backup", "main"])

    def test_an_alias_set_is_used_and_without_main_the_first_declared(self):
        self.replies = [done("a"), done("b")]
        ChatLoop(alias="backup").run(FakeTurn())
        _host.llm_aliases = lambda: ["zeta", "alpha"]
        ChatLoop().run(FakeTurn())
        self.assertEqual([a[0] for a in self.asked], ["backup", "zeta"])

    def test_a_closed_host_error_ends_the_run_quietly_and_others_raise(self):
        self.replies = [HostError("closed", "the turn is suspended: budget reached")]
        turn = FakeTurn()
        ChatLoop().run(turn)
        self.assertEqual(turn.steps, [])
        self.replies = [HostError("limit", "too many events")]
        with self.assertRaises(HostError):
            ChatLoop().run(FakeTurn())
        self.replies = [_host.LlmRefused("failed", "HTTP 503: overloaded")]
        with self.assertRaises(DeclaredModelFailed) as caught:
            ChatLoop().run(FakeTurn())
        self.assertEqual(str(caught.exception), "the declared model failed: HTTP 503: overloaded")
        self.replies = [_host.LlmRefused("unknown_alias", "no [llm.nope]")]
        with self.assertRaises(ConfigError):
            ChatLoop(alias="nope").run(FakeTurn())

    def test_with_a_config_or_nothing_declared_the_loop_goes_outbound(self):
        config = ModelConfig.from_env({"OPENAI_MODEL": "m"})
        self.assertEqual(ChatLoop(config=config)._route(), ("outbound", config))
        _host.llm_aliases = lambda: []
        with self.assertRaises(ConfigError):
            ChatLoop()._route()  # OPENAI_MODEL is not set here


if __name__ == "__main__":
    unittest.main()
