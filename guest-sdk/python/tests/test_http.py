"""Requests, responses and origins (the Rust SDK's http cases)."""

import unittest

from agenthost import http


class HttpTest(unittest.TestCase):
    def test_origins_keep_scheme_host_and_an_explicit_port(self):
        self.assertEqual(http.origin("https://api.openai.com/v1/chat/completions"), "https://api.openai.com")
        self.assertEqual(http.origin("http://127.0.0.1:8080/v1?x=1"), "http://127.0.0.1:8080")
        self.assertEqual(http.origin("HTTPS://User@Example.COM:443/"), "https://example.com:443")
        self.assertEqual(http.origin("http://[::1]:9/"), "http://[::1]:9")
        for bad in ["api.openai.com/v1", "ftp://example.com/", "not a url", "http://:80/"]:
            with self.assertRaises(http.InvalidRequest, msg=bad):
                http.origin(bad)

    def test_a_denied_request_says_which_origin_and_where_to_allow_it(self):
        self.assertEqual(
            str(http.RequestDenied("https://evil.example")),
            "the host refused the request to https://evil.example: it is not on this "
            "deployment's outbound allowlist ([outbound] allow in agenthost.toml)",
        )

    def test_requests_and_responses_read_simply(self):
        request = http.Request.post("https://x.test/a").header("Authorization", "Bearer k").json({"a": 1})
        self.assertEqual(request.method, "POST")
        self.assertEqual(len(request.headers), 2)
        self.assertEqual(request.body, b'{"a":1}')
        response = http.Response(429, [("retry-after", "3")], b'{"error":{"message":"slow down"}}')
        self.assertFalse(response.is_success)
        self.assertEqual(response.header("Retry-After"), "3")
        self.assertEqual(response.json()["error"]["message"], "slow down")
        self.assertIn("slow down", response.text())


if __name__ == "__main__":
    unittest.main()
