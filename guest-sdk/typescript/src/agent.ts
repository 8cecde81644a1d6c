/**
 * {@link Agent}: where an agent declares its routes, its tools and its
 * handler. The host's `describe` is derived from it.
 *
 * The agent's module runs once, when the component is built (componentize-js
 * runs it and snapshots the engine), so an `Agent` and its tools are declared
 * once and every turn starts from that snapshot. Read the environment
 * (secrets, `SERVICE_APPROVAL_POLICY`) inside the handler or the tools
 * (`turn.env`, `process.env`), never at the top of the module.
 *
 * @module
 */

import type { JsonSchema } from './schema.ts';
import type { Tool, ToolOptions } from './tools.ts';
import { withApprover } from './tools.ts';
import type { Turn } from './turn.ts';

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const ROUTE = /^\/[A-Za-z0-9\-_./]{0,127}$/;

/** The function that handles each turn. */
export type Handler = (turn: Turn) => void | Promise<void>;

/** An empty object schema: a tool without arguments. */
const NO_ARGUMENTS: JsonSchema = { type: 'object', properties: {} };

/**
 * An agent: routes, tools and the function that handles each turn.
 *
 * ```ts
 * import { Agent } from '@agenthost/sdk';
 *
 * const agent = new Agent({ routes: ['/chat'] });
 *
 * agent.tool({
 *   name: 'word_count',
 *   description: 'Counts the words of `text`.',
 *   parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
 *   run: ({ text }: { text: string }) => text.split(/\s+/).filter(Boolean).length,
 * });
 *
 * agent.handler((turn) => {
 *   turn.say(`You said: ${turn.inputText}`);
 * });
 *
 * export default agent;
 * ```
 *
 * `agenthost deploy` exports the project's `agent.ts` default export (or its
 * export named `agent`).
 */
export class Agent {
  /** The routes, in declaration order. */
  readonly routes: string[] = [];
  /** The tools, by name, in declaration order. */
  readonly tools = new Map<string, Tool>();
  #handler: Handler | undefined;

  constructor(options: { routes?: Iterable<string> } = {}) {
    for (const path of options.routes ?? []) {
      this.route(path);
    }
  }

  /**
   * Serves the agent on `path`, such as `/chat` (starts with `/`; letters,
   * digits and `- _ . /`; at most 128 characters; unique).
   */
  route(path: string): this {
    if (typeof path !== 'string' || !ROUTE.test(path)) {
      throw new TypeError(
        `route ${JSON.stringify(path)} must start with \`/\` and use only letters, digits and - _ . / (at most 128 characters)`,
      );
    }
    if (this.routes.includes(path)) {
      throw new TypeError(`route ${JSON.stringify(path)} is declared twice`);
    }
    this.routes.push(path);
    return this;
  }

  /**
   * Registers a tool. Each call's arguments are checked against
   * `parameters` (arguments that do not fit make the result an `error`
   * `invalid arguments: ...`), then `run` is called with them and the turn.
   * `needsApproval: true` gates the tool in code: each call waits for a
   * human decision before it runs; `approver: 'end_user'` lets the
   * session's own end user decide its calls.
   */
  tool<Args = Record<string, unknown>, Output = unknown>(options: ToolOptions<Args, Output>): this {
    const { name, description, parameters = NO_ARGUMENTS, needsApproval = false, run, approver } = options;
    if (typeof name !== 'string' || !TOOL_NAME.test(name)) {
      throw new TypeError(`tool name ${JSON.stringify(name)} must be 1 to 64 letters, digits, _ or -`);
    }
    if (this.tools.has(name)) {
      throw new TypeError(`tool ${JSON.stringify(name)} is declared twice`);
    }
    if (parameters === null || typeof parameters !== 'object' || Array.isArray(parameters)) {
      throw new TypeError(`tool ${name}: parameters must be a JSON Schema object`);
    }
    if (typeof run !== 'function') {
      throw new TypeError(`tool ${name}: run must be a function`);
    }
    this.tools.set(name, {
      name,
      description: String(description ?? ''),
      parameters: withApprover(name, parameters, approver),
      needsApproval: Boolean(needsApproval),
      run: run as Tool['run'],
    });
    return this;
  }

  /**
   * Registers the function that handles each turn (it may be `async`).
   *
   * Returning ends the turn with TURN_ENDED; a throw with TURN_ERROR,
   * except {@link ToolApprovalRequired}, which suspends it. On a turn
   * resumed by a decision, the SDK has already run the suspended step when
   * the handler is called ({@link Turn.resumed}).
   */
  handler(handler: Handler): this {
    if (this.#handler) {
      throw new TypeError('the agent already has a handler');
    }
    this.#handler = handler;
    return this;
  }

  /** @internal The registered handler. */
  get registeredHandler(): Handler | undefined {
    return this.#handler;
  }
}
