// The official MCP TypeScript SDK's client (@modelcontextprotocol/sdk, its
// Client over StreamableHTTPClientTransport) against a live agenthost's
// POST /mcp, driven by tests/e2e/mcp_server.rs:
//
//   node client.mjs <base url> <bearer credential> <mode>
//
// Modes (the same as client.py's):
// - `full`: lists the tools; calls `hello_chat` with a progress callback;
//   calls `ops_ops` twice on one session (the second with its session_id),
//   the second a gated call; calls `hello_chat` with input that fails the turn.
// - `scoped`: lists the tools, then calls `hello_chat` (another app's tool).
// - `list`: lists the tools.
//
// Prints one JSON report on stdout; the Rust test asserts on it.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [base, credential, mode] = process.argv.slice(2);
const report = { error: null, calls: {} };

/// One call: its result, and the progress notifications it received.
async function call(name, args) {
  const progress = [];
  try {
    const result = await client.callTool({ name, arguments: args }, undefined, {
      onprogress: (p) => progress.push(p),
    });
    return { result, progress };
  } catch (err) {
    return { error: String(err?.message ?? err), progress };
  }
}

const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
  requestInit: { headers: { Authorization: `Bearer ${credential}` } },
});
const client = new Client({ name: "agenthost-e2e-ts", version: "1.0.0" });
try {
  await client.connect(transport);
  report.protocolVersion = transport.protocolVersion ?? null;
  report.server = client.getServerVersion() ?? null;
  report.tools = (await client.listTools()).tools;
  if (mode === "full") {
    report.calls.hello = await call("hello_chat", { message: "hello there mcp" });
    const added = await call("ops_ops", { message: "add apples pears" });
    report.calls.add = added;
    const session = added.result?.structuredContent?.session_id;
    report.calls.gated = await call("ops_ops", { message: "delete apples", session_id: session });
    report.calls.failed = await call("hello_chat", { message: "say kaboom now" });
  } else if (mode === "scoped") {
    report.calls.other = await call("hello_chat", { message: "hi" });
  }
} catch (err) {
  report.error = String(err?.message ?? err);
} finally {
  await client.close().catch(() => {});
}
console.log(JSON.stringify(report));
