"""The official MCP Python SDK's client (`mcp` on PyPI, its `Client` over
`streamable_http_client`) against a live agenthost's POST /mcp, driven by
tests/e2e/mcp_server.rs:

    python client.py <base url> <bearer credential> <mode>

The modes are client.mjs's (`full`, `scoped`, `list`). Prints one JSON
report on stdout; the Rust test asserts on it.
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def dump(value):
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


async def call(client, name, arguments):
    """One call: its result, and the progress notifications it received."""
    progress = []

    async def on_progress(value, total, message):
        progress.append({"progress": value, "total": total, "message": message})

    try:
        result = await client.call_tool(name, arguments, progress_callback=on_progress)
        return {"result": dump(result), "progress": progress}
    except Exception as err:  # the report says what the client raised
        return {"error": str(err), "progress": progress}


async def main():
    base, credential, mode = sys.argv[1:4]
    report = {"error": None, "calls": {}}
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {credential}"})
    try:
        async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            init = client.session.initialize_result
            report["protocolVersion"] = init.protocol_version if init else None
            report["server"] = dump(init.server_info) if init else None
            report["tools"] = [dump(tool) for tool in (await client.list_tools()).tools]
            calls = report["calls"]
            if mode == "full":
                calls["hello"] = await call(client, "hello_chat", {"message": "hello there mcp"})
                added = await call(client, "ops_ops", {"message": "add apples pears"})
                calls["add"] = added
                session = ((added.get("result") or {}).get("structuredContent") or {}).get("session_id")
                calls["gated"] = await call(
                    client, "ops_ops", {"message": "delete apples", "session_id": session}
                )
                calls["failed"] = await call(client, "hello_chat", {"message": "say kaboom now"})
            elif mode == "scoped":
                calls["other"] = await call(client, "hello_chat", {"message": "hi"})
    except BaseException as err:  # an exception group from the transport's tasks included
        report["error"] = repr(err)
    print(json.dumps(report))


asyncio.run(main())
