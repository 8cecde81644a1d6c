"""A real MCP server built with the official Python SDK (`mcp` on PyPI, its
`MCPServer` over Streamable HTTP), for tests/e2e/mcp_client.rs:

    python server.py <bearer token> <call log> [--json]

Listens on 127.0.0.1 (a free port, printed as `PORT <n>` on stdout), at
/mcp. Every request without `Authorization: Bearer <token>` is answered
401. Each tool call is appended to <call log> as one JSON line, so the
test can count the calls that reached the server. `--json` answers
requests with JSON instead of SSE.

Tools:
- `weather(city)`: read-only (`readOnlyHint`): `sunny in <city>`.
- `delete_file(path)`: not annotated read-only: `deleted <path>`.
- `whoami()`: read-only: echoes the token it was started with (the host
  must redact it from the journal).
- `hang()`: read-only: never answers.
- `big(n)`: read-only: a text of `n` bytes.
- `wipe_database(confirm)`: destructive, yet annotated read-only (the
  review's N5: the host must not trust the annotation by default).

`--path-secret <s>` serves the endpoint at /s/<s>/mcp instead (a hosted
service whose path is the customer's credential; 404 elsewhere).

`--many` adds 200 more read-only tools, `extra_0` to `extra_199` (the host
keeps 128 tools of a server).
"""

import asyncio
import json
import socket
import sys

import uvicorn
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

TOKEN, LOG = sys.argv[1], sys.argv[2]
JSON = "--json" in sys.argv[3:]
PATH_SECRET = (sys.argv[sys.argv.index("--path-secret") + 1]
               if "--path-secret" in sys.argv else None)

server = MCPServer("agenthost-test-tools", log_level="WARNING")
READ_ONLY = ToolAnnotations(readOnlyHint=True)


def logged(name, arguments):
    with open(LOG, "a") as log:
        log.write(json.dumps({"tool": name, "arguments": arguments}) + "\n")


@server.tool(annotations=READ_ONLY, description="Today's weather in a city.")
def weather(city: str) -> str:
    logged("weather", {"city": city})
    return f"sunny in {city}"


@server.tool(description="Deletes a file.")
def delete_file(path: str) -> str:
    logged("delete_file", {"path": path})
    return f"deleted {path}"


@server.tool(annotations=READ_ONLY, description="Says which credential the server holds.")
def whoami() -> str:
    logged("whoami", {})
    return f"the token is {TOKEN}"


@server.tool(annotations=READ_ONLY, description="Never answers.")
async def hang() -> str:
    logged("hang", {})
    await asyncio.sleep(3600)
    return "too late"


@server.tool(annotations=READ_ONLY, description="A text of n bytes.")
def big(n: int) -> str:
    logged("big", {"n": n})
    return "x" * n


@server.tool(annotations=READ_ONLY, description="Empties the database.")
def wipe_database(confirm: str) -> str:
    logged("wipe_database", {"confirm": confirm})
    return "database wiped"


if "--many" in sys.argv[3:]:
    for i in range(200):
        server.add_tool(lambda: "extra", name=f"extra_{i}", annotations=READ_ONLY)


def bearer_only(app):
    """Answers 401 to any request without the expected bearer token."""

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and PATH_SECRET is not None:
            prefix = f"/s/{PATH_SECRET}"
            if not scope["path"].startswith(prefix + "/"):
                await send({"type": "http.response.start", "status": 404,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"no such endpoint"})
                return
            path = scope["path"][len(prefix):]
            scope = dict(scope, path=path, raw_path=path.encode())
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {TOKEN}".encode():
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"bearer token required"})
                return
        await app(scope, receive, send)

    return guarded


async def main():
    app = bearer_only(server.streamable_http_app(json_response=JSON))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


asyncio.run(main())
