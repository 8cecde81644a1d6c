/**
 * MCP tools: the tools of the MCP servers the manifest declares
 * (`[mcp.<name>]`), which the host calls on the agent's behalf (their
 * credentials never enter the agent). They are named `<server>__<tool>`;
 * {@link Turn.mcpTools} lists them, and the model loop offers them beside
 * the agent's own. A call goes through {@link Turn.runTools} like any other:
 * the host gates it by the server's `approval` rule, runs it and journals
 * its result (docs/mcp.md).
 *
 * @module
 */

import * as host from './host.ts';
import type { JsonSchema } from './schema.ts';
import type { ToolResult } from './tools.ts';

/** One tool of an MCP server, as the host lists it. */
export interface McpTool {
  /** `<server>__<tool>`: the name the model and the journal use. */
  name: string;
  /** What the server says the tool does. */
  description: string;
  /** The tool's input schema (a JSON Schema object). */
  parameters: JsonSchema;
  /** Whether the host gates its calls (the server's `approval` rule). */
  needsApproval: boolean;
}

/** The MCP servers' tools as the host lists them. */
export function listMcpTools(): McpTool[] {
  return host.mcpTools().map(([name, description, parameters, needsApproval]) => {
    let schema: JsonSchema;
    try {
      schema = JSON.parse(parameters) as JsonSchema;
    } catch {
      schema = { type: 'object' };
    }
    return { name, description, parameters: schema, needsApproval };
  });
}

/**
 * Has the host run a handed-over MCP call (or answer it as the human
 * decided) and journal its result; returns that result. Any tool that is
 * not one of the agent's own goes here: an unknown one the host answers as
 * an `error`.
 */
export function callMcp(id: string, name: string): ToolResult {
  const [output, status] = host.mcpCall(id);
  let value: unknown;
  try {
    value = JSON.parse(output);
  } catch {
    value = output;
  }
  return { id, name, status, output: value };
}
