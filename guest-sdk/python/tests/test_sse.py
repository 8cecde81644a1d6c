"""Server-Sent Events decoded from chunks split anywhere (the Rust SDK's sse.rs cases)."""

import unittest

from agenthost.http.sse import SseDecoder, SseEvent


def decode(chunks):
    decoder = SseDecoder()
    events = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    return events


def data(events):
    return [e.data for e in events]


class SseTest(unittest.TestCase):
    def test_events_split_anywhere_across_reads_come_out_whole(self):
        whole = b'data: {"a":1}\n\ndata: {"b":2}\n\ndata: [DONE]\n\n'
        expected = ['{"a":1}', '{"b":2}', "[DONE]"]
        self.assertEqual(data(decode([whole])), expected)
        for cut in range(1, len(whole)):
            self.assertEqual(data(decode([whole[:cut], whole[cut:]])), expected, cut)
        self.assertEqual(data(decode([whole[i : i + 1] for i in range(len(whole))])), expected)
        # A multi-byte character split between reads.
        text = "data: é\n\n".encode()
        self.assertEqual(data(decode([text[:7], text[7:]])), ["é"])

    def test_comments_multi_line_data_crlf_and_metadata_blocks(self):
        events = decode(
            [
                b": keep-alive\n\n",
                b"event: note\r\nid: 7\r\ndata: line one\r\ndata: line two\r\n\r\n",
                b"retry: 1000\n\n",
                b"data:no space\n\n",
                b"data\n\n",
            ]
        )
        self.assertEqual(events[0], SseEvent("note", "line one\nline two", "7"))
        self.assertEqual(data(events[1:]), ["no space", ""])
        # \r\n split between two reads is one line end.
        self.assertEqual(data(decode([b"data: a\r", b"\n\r\n"])), ["a"])

    def test_an_unfinished_last_block_is_dropped_and_bad_utf8_is_an_error(self):
        self.assertEqual(data(decode([b"data: a\n\ndata: cut off"])), ["a"])
        with self.assertRaises(UnicodeDecodeError):
            decode([b"data: \xff\xfe\n\n"])


if __name__ == "__main__":
    unittest.main()
