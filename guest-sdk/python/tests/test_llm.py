"""The model loop's pieces: configuration, requests, retries, provider
messages, steps and reasons (the Rust SDK's llm cases)."""

import unittest

from agenthost.http import Response
from agenthost.llm import ChatLoop, ModelConfig, steps, step_reason, to_tool_call
from agenthost.llm.client import next_wait, provider_message, request_body
from agenthost.llm.errors import ConfigError, Stopped
from agenthost.llm.stream import ModelCall
from agenthost.tools import ToolCall


class LlmTest(unittest.TestCase):
    def test_configuration_defaults_and_required_values(self):
        config = ModelConfig.from_env({"OPENAI_MODEL": "gpt-test"})
        self.assertEqual(config.base_url, "https://api.openai.com/v1")
        self.assertIsNone(config.api_key)
        self.assertEqual(config.completions_url, "https://api.openai.com/v1/chat/completions")
        config = ModelConfig.from_env(
            {"OPENAI_MODEL": "m", "OPENAI_BASE_URL": "http://127.0.0.1:9000/v1/", "OPENAI_API_KEY": "sk-test"}
        )
        self.assertEqual(config.completions_url, "http://127.0.0.1:9000/v1/chat/completions")
        self.assertNotIn("sk-test", repr(config))
        with self.assertRaises(ConfigError) as caught:
            ModelConfig.from_env({"OPENAI_MODEL": " "})
        self.assertIn("OPENAI_MODEL is not set", str(caught.exception))
        self.assertIsNone(ModelConfig.from_env({"OPENAI_MODEL": "m", "OPENAI_API_KEY": ""}).api_key)

    def test_the_body_streams_and_lists_the_declared_tools(self):
        from agenthost import Agent

        agent = Agent(routes=["/chat"])

        @agent.tool
        def lookup_order(order_id: str) -> dict:
            """Looks an order up."""
            return {}

        config = ModelConfig(model="m", base_url="http://x/v1")
        messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
        body = request_body(config, messages, agent.tools.values())
        self.assertEqual(body["model"], "m")
        self.assertIs(body["stream"], True)
        self.assertEqual(body["stream_options"], {"include_usage": True})
        self.assertEqual(body["tools"][0]["function"]["name"], "lookup_order")
        self.assertEqual(body["tools"][0]["function"]["description"], "Looks an order up.")
        self.assertNotIn("tools", request_body(config, messages, []))

    def test_retries_back_off_and_stop(self):
        self.assertEqual(next_wait(1, None, 0), (1.0, ""))
        self.assertEqual(next_wait(2, None, 1), (2.0, ""))
        self.assertEqual(next_wait(4, None, 7), (8.0, ""))
        self.assertIn("after 5 attempts", next_wait(5, None, 15)[1])
        self.assertEqual(next_wait(1, "0", 0), (0.0, ""))
        self.assertEqual(next_wait(1, " 7 ", 0), (7.0, ""))
        self.assertEqual(next_wait(1, "Wed, 21 Oct 2015 07:28:00 GMT", 0), (1.0, ""))
        wait, why = next_wait(2, "45", 0)
        self.assertIsNone(wait)
        self.assertIn("30 s retry budget", why)
        self.assertIsNone(next_wait(3, None, 27)[0])

    def test_provider_messages_come_from_the_error_body(self):
        def response(status, body):
            return Response(status, [], body.encode())

        self.assertEqual(
            provider_message(response(401, '{"error":{"message":"Incorrect API key provided","type":"x"}}')),
            "Incorrect API key provided",
        )
        self.assertEqual(provider_message(response(500, '{"error":"boom"}')), "boom")
        self.assertEqual(provider_message(response(502, "Bad Gateway\n")), "Bad Gateway")
        self.assertEqual(provider_message(response(503, "")), "(no message)")
        self.assertEqual(len(provider_message(response(500, "x" * 2000))), 501)

    def test_model_calls_become_journaled_calls(self):
        call = to_tool_call(ModelCall("x", "lookup_order", '{"order_id":"A1"}'))
        self.assertIsNone(call.id)
        self.assertEqual(call.arguments, {"order_id": "A1"})
        self.assertEqual(to_tool_call(ModelCall("x", "t", "  ")).arguments, {})
        self.assertEqual(to_tool_call(ModelCall("x", "t", "{oops")).arguments, "{oops")

    def test_no_step_holds_two_known_gated_calls(self):
        def names(result):
            return [[c.name for c in step] for step in result]

        gated = lambda name: name.startswith("refund")  # noqa: E731
        calls = [ToolCall(n) for n in ["lookup", "refund1", "lookup2", "refund2", "x"]]
        self.assertEqual(names(steps(calls, gated)), [["lookup", "refund1", "lookup2"], ["refund2", "x"]])
        self.assertEqual(names(steps([ToolCall("a"), ToolCall("b")], gated)), [["a", "b"]])
        self.assertEqual(steps([], gated), [])

    def test_the_step_reason_is_the_models_words_or_the_tools(self):
        calls = [ModelCall("x", "refund_order", "{}"), ModelCall("y", "lookup_order", "{}")]
        self.assertEqual(step_reason("  I will refund it. ", calls), "I will refund it.")
        self.assertEqual(step_reason("", calls), "the model asked to call refund_order, lookup_order")
        self.assertEqual(len(step_reason("é" * 800, calls).encode()), 1000)

    def test_errors_read_as_in_the_rust_sdk(self):
        self.assertEqual(
            str(Stopped("length")),
            "the model's answer was cut off: it reached its output token limit (finish_reason `length`)",
        )
        self.assertEqual(ChatLoop("x", max_rounds=0).max_rounds, 1)


if __name__ == "__main__":
    unittest.main()
