/**
 * Tools: calls, results, the registered tools, and running one call.
 * The step protocol is {@link Turn.runTools}; resuming a suspended step is
 * in `resume.ts`.
 *
 * @module
 */

import * as host from './host.ts';
import { dumps, toJsonValue } from './json.ts';
import { check, type JsonSchema, withDefaults } from './schema.ts';
import type { Turn } from './turn.ts';

/**
 * One tool call: a tool's name and its arguments (JSON data, usually an object).
 *
 * `id` is unique within the session (the tool's idempotency key); left out,
 * {@link Turn.runTools} names it `call_<turn>_<n>`.
 */
export interface ToolCall {
  name: string;
  arguments?: unknown;
  id?: string;
}

/** A call the host hands back. Arguments that are not JSON are kept as a string, so the tool reports them as invalid. */
export function callFromWire(id: string, name: string, argumentsJson: string): ToolCall & { id: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(argumentsJson);
  } catch {
    parsed = argumentsJson;
  }
  return { id, name, arguments: parsed };
}

/**
 * How a tool call ended: `ok` (the tool returned), `error` (it threw, is
 * unknown, or its arguments did not fit), `denied` (a human denied it).
 */
export type ToolStatus = 'ok' | 'error' | 'denied';

/** The outcome of one tool call, as reported to the host (TOOL_RESULT). */
export interface ToolResult {
  id: string;
  name: string;
  status: ToolStatus;
  /** The tool's return value as JSON data, or for an error or a denial a string saying why. */
  output: unknown;
}

/** How a tool is declared with {@link Agent.tool}. */
export interface ToolOptions<Args = Record<string, unknown>, Output = unknown> {
  /** `[A-Za-z0-9_-]{1,64}`, unique within the agent. */
  name: string;
  /** What the tool does, for a model (and a human) to read. */
  description: string;
  /**
   * The JSON Schema of the arguments (an object schema), written by hand.
   * The SDK checks each call's arguments against it before `run`. Left out,
   * the tool takes no arguments (`{"type": "object", "properties": {}}`).
   */
  parameters?: JsonSchema;
  /** Gates the tool in code: each call waits for a human decision before it runs. */
  needsApproval?: boolean;
  /**
   * Who may decide the tool's calls: `'end_user'` lets the session's own
   * end user decide them (operators still may), as the manifest's
   * `approver = "end_user"` does; it matters where the tool is gated
   * (`needsApproval`, the manifest, or the operator's policy). Left out
   * (or `'operator'`): operators only. See {@link withApprover}.
   */
  approver?: 'end_user' | 'operator';
  /**
   * Runs one call. Its return value (any JSON data) is the output; a throw
   * makes the result an `error` whose output is the message.
   */
  run: (args: Args, turn: Turn) => Output | Promise<Output>;
}

/** A registered tool: its spec and its function. */
export interface Tool {
  name: string;
  description: string;
  parameters: JsonSchema;
  needsApproval: boolean;
  run: (args: never, turn: Turn) => unknown;
}

/**
 * Runs a call's tool (without reporting it): its return value is the output
 * (`ok`); a throw, an unknown tool or arguments that do not fit make an
 * `error` whose output is the message.
 */
export async function invoke(turn: Turn, tools: Map<string, Tool>, id: string, call: ToolCall): Promise<ToolResult> {
  const { name } = call;
  const tool = tools.get(name);
  if (!tool) {
    return { id, name, status: 'error', output: `unknown tool: ${name}` };
  }
  const args = call.arguments === undefined ? {} : call.arguments;
  const problem = check(tool.parameters, args);
  if (problem !== undefined) {
    return { id, name, status: 'error', output: `invalid arguments: ${problem}` };
  }
  let output: unknown;
  try {
    output = await tool.run(withDefaults(tool.parameters, args) as never, turn);
  } catch (error) {
    const message = error instanceof Error ? error.message || error.name : String(error);
    return { id, name, status: 'error', output: message };
  }
  try {
    output = toJsonValue(output === undefined ? null : output);
  } catch (error) {
    return { id, name, status: 'error', output: `invalid output: ${(error as Error).message}` };
  }
  return { id, name, status: 'ok', output };
}

/** Reports a result to the host (TOOL_RESULT). */
export function report(result: ToolResult): void {
  host.toolResult(result.id, dumps(result.output), result.status);
}

/** The id the SDK gives the `n`th call (from 1) it names in turn `turn`. */
export function callId(turn: number, n: number): string {
  return `call_${turn}_${n}`;
}

/** The parameters-schema keyword by which a tool's code names who may decide its calls. */
export const APPROVER_KEYWORD = 'x-agenthost-approver';

/**
 * The tool's parameters schema, saying who may decide its calls: with
 * `approver` `'end_user'` it carries `"x-agenthost-approver": "end_user"`,
 * which the host reads at deploy (docs/end-users.md). A copy: the schema
 * given is left as it is.
 */
export function withApprover(tool: string, parameters: JsonSchema, approver: unknown): JsonSchema {
  if (approver === undefined || approver === 'operator') {
    return parameters;
  }
  if (approver !== 'end_user') {
    throw new TypeError(`tool ${tool}: approver must be 'end_user' or 'operator', not ${JSON.stringify(approver)}`);
  }
  return { ...parameters, [APPROVER_KEYWORD]: 'end_user' };
}
