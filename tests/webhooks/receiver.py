"""A webhook receiver for the e2e tests (tests/e2e/webhooks.rs).

Verifies every delivery with the Standard Webhooks reference library
(`standardwebhooks`, from PyPI) against each secret the test gave its
path, records it, and answers as the test configured. Prints its port on
the first line of stdout, then serves on 127.0.0.1 until killed.

  POST /_config  {"path", "secrets": [...], "fail": N, "fail_status": 500,
                 "status": 200}: the next N deliveries to `path` get
                 `fail_status`, the others `status`
  GET  /_log     every delivery so far: {"path", "id", "timestamp", "body",
                 "verified": [indices of the secrets whose check passed],
                 "answered"}
  POST <path>    a delivery
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook

CONFIG = {}
LOG = []
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body=b""):
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/_log":
            with LOCK:
                body = json.dumps(LOG).encode()
            return self.answer(200, body)
        self.answer(404)

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length)
        if self.path == "/_config":
            config = json.loads(raw)
            with LOCK:
                CONFIG[config["path"]] = config
            return self.answer(204)
        headers = {k: v for (k, v) in self.headers.items()}
        with LOCK:
            config = CONFIG.get(self.path, {})
            verified = []
            for index, secret in enumerate(config.get("secrets", [])):
                try:
                    Webhook(secret).verify(raw, headers)
                    verified.append(index)
                except Exception:
                    pass
            if config.get("fail", 0) > 0:
                config["fail"] -= 1
                status = config.get("fail_status", 500)
            else:
                status = config.get("status", 200)
            LOG.append({
                "path": self.path,
                "id": self.headers.get("webhook-id"),
                "timestamp": self.headers.get("webhook-timestamp"),
                "body": json.loads(raw),
                "verified": verified,
                "answered": status,
            })
        self.answer(status, b"received by the test receiver")


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
