/**
 * {@link Turn}: what one turn starts from (session, number, route, reason,
 * input) and everything it can do: stream messages, read the history and
 * the end user, run tools, end the session, read the environment.
 *
 * @module
 */

import { BadInput, ToolApprovalRequired } from './errors.ts';
import { type EndUser, History, isObject, readEndUser } from './history.ts';
import * as host from './host.ts';
import { dumps } from './json.ts';
import { Message } from './message.ts';
import { callMcp, listMcpTools, type McpTool } from './mcp.ts';
import { callFromWire, callId, invoke, report, type Tool, type ToolCall, type ToolResult } from './tools.ts';

/** A human's decision on a gated tool call, which this turn resumes from. */
export interface Decision {
  /** Whether the human approved the call (with {@link Decision.result}, the approval answered it in place of the tool, which did not run). */
  approved: boolean;
  /** Who decided (free text). */
  approver: string;
  /** The call that waited for the decision (its id is set). */
  call: ToolCall & { id: string };
  /** Every call of the suspended step, in the order the agent proposed them, `call` included (each id set). */
  step: (ToolCall & { id: string })[];
  /** A note from the human who decided, for example why the call was denied (a denied call's output carries it too, so a model sees it). */
  message?: string;
  /** The result the human gave in place of the tool: the tool did not run, and this is the pending call's output. */
  result?: unknown;
  /** The agent's own arguments, when the human edited them (`call` holds the edited ones, which the tool ran with). */
  originalArguments?: unknown;
}

/** The text of an input: a JSON string, or an object's string field `text`. */
export function inputText(value: unknown): string | undefined {
  if (typeof value === 'string') {
    return value;
  }
  if (isObject(value) && typeof value.text === 'string') {
    return value.text;
  }
  return undefined;
}

/** What a turn is built from (the WIT `turn`, decoded). */
export interface TurnStart {
  sessionId: string;
  number: number;
  route: string;
  inputJson: string;
  decision: Decision | undefined;
  env: Record<string, string>;
}

/**
 * One turn of a session, handed to the agent's handler.
 *
 * Every turn runs in a fresh instance: what the agent needs from earlier
 * turns it reads back with {@link history}.
 */
export class Turn {
  /** The session's id. */
  readonly sessionId: string;
  /** 1 for the session's first turn, then 2, 3, ... */
  readonly number: number;
  /** The route the session was created on, such as `/chat`. */
  readonly route: string;
  /** The decision this turn resumes from, or `undefined` for a new input. */
  readonly decision: Decision | undefined;
  /** The turn's input as JSON data (for a resumed turn, the input of the turn it resumes). */
  readonly input: unknown;
  /**
   * The turn's environment variables: the secrets the manifest declares
   * (`[agent] secrets`) and `SERVICE_APPROVAL_POLICY`, read at the start of
   * the turn. The same values are in `process.env`.
   */
  readonly env: Readonly<Record<string, string>>;
  /**
   * On a turn resumed by a decision: the suspended step's results in step
   * order (the SDK ran the step before the handler was called). `undefined`
   * on an input turn.
   */
  resumed: ToolResult[] | undefined;

  readonly #tools: Map<string, Tool>;
  readonly #messages: Message[] = [];
  #callsNamed = 0;
  #suspended = false;

  /** @internal The SDK builds the turn. */
  constructor(start: TurnStart, tools: Map<string, Tool>) {
    try {
      this.input = JSON.parse(start.inputJson) as unknown;
    } catch (error) {
      throw new BadInput(`the turn's input is not JSON: ${(error as Error).message}`);
    }
    this.sessionId = start.sessionId;
    this.number = start.number;
    this.route = start.route;
    this.decision = start.decision;
    this.env = Object.freeze({ ...start.env });
    this.#tools = tools;
  }

  /** Why this turn runs: `"input"` or `"approval_decision"`. */
  get reason(): 'input' | 'approval_decision' {
    return this.decision ? 'approval_decision' : 'input';
  }

  /** The input as text: a JSON string, or the string field `text` of an object. */
  get inputText(): string | undefined {
    return inputText(this.input);
  }

  /** On a resumed turn, the result of the call the human decided on. */
  get pendingResult(): ToolResult | undefined {
    const decision = this.decision;
    return decision && this.resumed?.find((r) => r.id === decision.call.id);
  }

  /** Whether the host suspended this turn at a gated call (see {@link runTools}). */
  get suspended(): boolean {
    return this.#suspended;
  }

  // Messages

  /** Opens an assistant message (MESSAGE_START) to stream into. */
  message(): Message {
    const message = new Message(host.messageStart());
    this.#messages.push(message);
    return message;
  }

  /** Writes `text` as a whole assistant message (start, one delta, end). */
  say(text: string): void {
    const message = this.message();
    message.write(text);
    message.finish();
  }

  /** @internal Finishes the messages the handler left open. */
  finishMessages(): void {
    for (const message of this.#messages) {
      message.finishQuietly();
    }
  }

  // History

  /** The session's journal, read lazily page by page as it is iterated. */
  history(): History {
    return new History();
  }

  /**
   * The end user this session serves, or `null` when it was created with an
   * API key (an invocation or platform key) rather than by an end user. Each
   * call reads the journal's first event (SESSION_CREATED).
   */
  endUser(): EndUser | null {
    return readEndUser();
  }

  // Tools

  /** The agent's tools, by name. */
  get tools(): ReadonlyMap<string, Tool> {
    return this.#tools;
  }

  /**
   * Runs one step of tool calls: hands them to the host (one TOOL_CALL
   * each), then, unless one of them needs a human decision, runs each tool
   * in order and reports its result. An empty step does nothing.
   *
   * `reason` is shown to the human who decides on a gated call.
   *
   * Throws {@link ToolApprovalRequired} when the host suspends the turn (none
   * of the step's calls has run, and every further effect of this turn is
   * refused): let it propagate and the turn ends cleanly; the turn that
   * resumes from the decision runs the step first. A step with two or more
   * gated calls is not suspended: the host fails the turn.
   */
  async runTools(calls: Iterable<ToolCall>, reason?: string): Promise<ToolResult[]> {
    const named: [string, ToolCall][] = [...calls].map((call) => [call.id ?? this.#nextCallId(), call]);
    if (named.length === 0) {
      return [];
    }
    const wire = named.map(([id, call]): [string, string, string] => [
      id,
      call.name,
      dumps(call.arguments === undefined ? {} : call.arguments),
    ]);
    const suspended = host.toolCalls(wire, reason);
    if (suspended) {
      this.#suspended = true;
      throw new ToolApprovalRequired(callFromWire(...suspended));
    }
    const results: ToolResult[] = [];
    for (const [id, call] of named) {
      if (!this.#tools.has(call.name)) {
        // Not the agent's own: the host runs it (an MCP tool) and journals its result.
        results.push(callMcp(id, call.name));
        continue;
      }
      const result = await invoke(this, this.#tools, id, call);
      report(result);
      results.push(result);
    }
    return results;
  }

  #mcpTools: McpTool[] | undefined;

  /**
   * The tools of the manifest's MCP servers (`[mcp.<name>]`), named
   * `<server>__<tool>`, listed by the host once per turn (a server that
   * cannot be reached is left out). Empty when there is none.
   */
  mcpTools(): McpTool[] {
    this.#mcpTools ??= listMcpTools();
    return [...this.#mcpTools];
  }

  #nextCallId(): string {
    this.#callsNamed += 1;
    return callId(this.number, this.#callsNamed);
  }

  // The session

  /** Ends the session after this turn: it accepts no more input. */
  endSession(): void {
    host.endSession();
  }

  // Timers (docs/schedules.md)

  /**
   * Schedules `input` as a later turn of this session and returns the
   * schedule's id: `afterMs` milliseconds from now, or `at` a time (a
   * `Date`, or RFC 3339 text with a UTC offset); exactly one of them.
   *
   * It takes effect only if this turn ends well: the host journals it
   * (TURN_SCHEDULED) in the turn's final commit, so a turn that fails
   * schedules nothing. At its time the session gets a turn with `input`
   * (queued if the session is busy). A turn makes at most 10 schedules and
   * a session holds at most 100 ({@link HostError} `limit` beyond).
   */
  schedule(input: unknown, when: { afterMs?: number; at?: string | Date }): string {
    const { afterMs, at } = when;
    if ((afterMs === undefined) === (at === undefined)) {
      throw new TypeError('schedule: give `afterMs` or `at`, exactly one');
    }
    const after = afterMs === undefined ? undefined : BigInt(Math.max(0, Math.floor(afterMs)));
    const time = at instanceof Date ? at.toISOString() : at;
    return host.schedule(after, time, dumps(input === undefined ? null : input));
  }

  /**
   * Cancels a schedule of this session that has not fired (made by this
   * turn, an earlier one, or through the API). Returns whether one was
   * pending. A cancel too is kept only if this turn ends well.
   */
  cancelSchedule(id: string): boolean {
    return host.cancelSchedule(id);
  }
}
