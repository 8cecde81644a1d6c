"""Streamed chat completions put together (the Rust SDK's stream.rs cases)."""

import json
import unittest

from agenthost.llm.errors import LlmError
from agenthost.llm.stream import Assembler, ModelCall


def chunk(delta, finish_reason=None) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-test", "system_fingerprint": "fp",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            "usage": None,
        }
    )


def usage_chunk() -> str:
    return json.dumps(
        {
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-test", "choices": [],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
        }
    )


def run(datas):
    assembler = Assembler()
    deltas = []
    try:
        for data in datas:
            text = assembler.feed(data)
            if text:
                deltas.append(text)
        return deltas, assembler.finish()
    except LlmError as error:
        return deltas, error


class StreamTest(unittest.TestCase):
    def test_text_streams_delta_by_delta(self):
        deltas, completion = run(
            [
                chunk({"role": "assistant", "content": "", "refusal": None}),
                chunk({"content": "Hello"}),
                chunk({"content": ", world"}),
                chunk({}, "stop"),
                usage_chunk(),
                "[DONE]",
            ]
        )
        self.assertEqual(deltas, ["Hello", ", world"])
        self.assertEqual(completion.text, "Hello, world")
        self.assertEqual(completion.finish_reason, "stop")
        self.assertEqual(completion.tool_calls, [])
        self.assertEqual(completion.usage, (12, 5))

    def test_parallel_tool_calls_are_put_together_by_index(self):
        def call(index, id, name, arguments):
            fragment = {"index": index, "function": {"arguments": arguments}}
            if id:
                fragment["id"] = id
                fragment["type"] = "function"
            if name:
                fragment["function"]["name"] = name
            return chunk({"tool_calls": [fragment]})

        deltas, completion = run(
            [
                chunk({"role": "assistant", "content": None}),
                call(0, "call_a", "lookup_order", ""),
                call(0, None, None, '{"order'),
                call(0, None, None, '_id": "A1'),
                call(1, "call_b", "lookup_order", ""),
                call(0, None, None, '"}'),
                call(1, None, None, '{"order_id":"B2"}'),
                chunk({}, "tool_calls"),
                usage_chunk(),
                "[DONE]",
            ]
        )
        self.assertEqual(deltas, [])
        self.assertEqual(completion.finish_reason, "tool_calls")
        self.assertEqual(
            completion.tool_calls,
            [
                ModelCall("call_a", "lookup_order", '{"order_id": "A1"}'),
                ModelCall("call_b", "lookup_order", '{"order_id":"B2"}'),
            ],
        )

    def test_calls_without_an_index_start_at_each_new_id(self):
        _, completion = run(
            [
                chunk({"tool_calls": [{"id": "x", "function": {"name": "a", "arguments": "{"}}]}),
                chunk({"tool_calls": [{"function": {"arguments": "}"}}]}),
                chunk({"tool_calls": [{"id": "y", "function": {"name": "b", "arguments": "{}"}}]}, "tool_calls"),
            ]
        )
        self.assertEqual([(c.name, c.arguments) for c in completion.tool_calls], [("a", "{}"), ("b", "{}")])

    def test_every_finish_reason_is_read(self):
        for wire, reason in [
            ("stop", "stop"),
            ("tool_calls", "tool_calls"),
            ("function_call", "tool_calls"),
            ("length", "length"),
            ("content_filter", "content_filter"),
            ("eos", "eos"),
        ]:
            _, completion = run([chunk({"content": "x"}, wire)])
            self.assertEqual(completion.finish_reason, reason, wire)
        _, completion = run([chunk({"content": "x"}), "[DONE]"])
        self.assertEqual(completion.finish_reason, "stop")

    def test_malformed_streams_say_what_is_wrong(self):
        def message(datas):
            _, error = run(datas)
            self.assertIsInstance(error, LlmError)
            return str(error)

        self.assertIn("chunk 1 is not JSON", message(["{not json"]))
        self.assertIn("not a JSON object", message(["[1,2]"]))
        self.assertIn("not an array", message([json.dumps({"choices": 3})]))
        self.assertIn("no `data:` event arrived", message([]))
        self.assertIn("ended before the model finished", message([chunk({"content": "half"})]))
        self.assertIn(
            "tool call 0 has no function name",
            message([chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}, "tool_calls")]),
        )
        self.assertIn(
            "`functions.x`, which is not a tool name",
            message(
                [chunk({"tool_calls": [{"index": 0, "function": {"name": "functions.x", "arguments": "{}"}}]}, "tool_calls")]
            ),
        )
        self.assertEqual(
            message([json.dumps({"error": {"message": "overloaded", "type": "server_error"}})]),
            "the model provider reported an error in its response stream: overloaded",
        )

    def test_nothing_after_done_counts(self):
        _, completion = run([chunk({"content": "x"}, "stop"), "[DONE]", "garbage"])
        self.assertEqual(completion.text, "x")


if __name__ == "__main__":
    unittest.main()
