/**
 * `@agenthost/sdk`: write agenthost agents in TypeScript.
 *
 * An agent declares its routes, its tools and its handler on an
 * {@link Agent}; the handler runs one turn of a session with a {@link Turn},
 * which streams messages, reads the session's history and runs tools.
 * `agenthost deploy` bundles the project's `agent.ts` with esbuild and builds
 * it into a component with componentize-js.
 *
 * ```ts
 * import { Agent } from '@agenthost/sdk';
 *
 * const agent = new Agent({ routes: ['/chat'] });
 * agent.handler((turn) => turn.say(`Hello, ${turn.inputText ?? 'world'}!`));
 * export default agent;
 * ```
 *
 * Every turn runs in a fresh instance started from the snapshot taken when
 * the component was built: nothing a turn changes in memory survives into
 * the next one, so an agent keeps its context in the session's journal
 * (what it writes) and reads it back with {@link Turn.history}.
 *
 * Outbound HTTP is the standard `fetch` (to the origins the deployment's
 * `[outbound] allow` lists; a request the host refuses rejects with an
 * {@link HttpError} saying why); `@agenthost/sdk/llm`'s `ChatLoop` runs a model
 * loop over an OpenAI-compatible chat completions API with the agent's tools.
 *
 * @module
 */

export { Agent, type Handler } from './agent.ts';
export { AgentError, BadInput, HostError, type HostErrorKind, ToolApprovalRequired } from './errors.ts';
export { exportAgent, failureMessage } from './export.ts';
export { type ChatMessage, chatMessage, type EndUser, type Event, History } from './history.ts';
export * as journal from './journal.ts';
export { AddressProhibited, HttpError, RequestDenied } from './http.ts';
export { dumps } from './json.ts';
export type { McpTool } from './mcp.ts';
export { Message } from './message.ts';
export type { JsonSchema } from './schema.ts';
export type { Tool, ToolCall, ToolOptions, ToolResult, ToolStatus } from './tools.ts';
export { type Decision, inputText, Turn } from './turn.ts';

/** The SDK's version. */
export const VERSION = '0.1.0';
