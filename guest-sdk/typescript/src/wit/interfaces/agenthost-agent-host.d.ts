/// <reference path="./agenthost-agent-types.d.ts" />
declare module 'agenthost:agent/host@0.1.0' {
  /**
   * Opens an assistant message (MESSAGE_START) and returns its id.
   */
  export function messageStart(): string;
  /**
   * Appends text to an open message (MESSAGE_DELTA).
   */
  export function messageDelta(messageId: string, text: string): void;
  /**
   * Closes a message (MESSAGE_END, carrying the full text).
   */
  export function messageEnd(messageId: string): void;
  /**
   * Hands over one step's tool calls: journals a TOOL_CALL for each and
   * says whether to run them or to suspend. `reason` is the agent's
   * explanation, shown to the human who decides.
   */
  export function toolCalls(calls: Array<ToolCall>, reason: string | undefined): Step;
  /**
   * Records the result of a call handed over earlier (TOOL_RESULT).
   * `output` is JSON text.
   */
  export function toolResult(toolCallId: string, output: string, status: ToolStatus): void;
  /**
   * Reads the session's journal: events with seq greater than `after`
   * (from the start when none), at most `limit` of them (capped by the host).
   */
  export function readHistory(after: bigint | undefined, limit: number): HistoryPage;
  /**
   * Ends the session (SESSION_ENDED once the turn ends): it accepts no more input.
   */
  export function endSession(): void;
  /**
   * Called by the SDK's panic hook just before the guest traps, so the
   * panic message reaches TURN_ERROR.
   */
  export function reportPanic(message: string): void;
  /**
   * timers (issue 32, docs/schedules.md): inputs this session gets later,
   * as turns of their own.
   * Schedules `input` (JSON text) as a later turn of this session: in
   * `after-ms` milliseconds, or at `at` (RFC 3339 with a UTC offset);
   * exactly one of the two. Returns the schedule's id. It takes effect
   * only when this turn commits: its TURN_SCHEDULED is journaled in the
   * turn's final commit, so a turn that fails (or is cancelled) schedules
   * nothing. At its time the input starts a turn whose TURN_STARTED says
   * reason `schedule` (the guest sees reason `input`). `limit` when this
   * turn made 10 already or the session holds 100 (the turn goes on).
   */
  export function schedule(afterMs: bigint | undefined, at: string | undefined, input: string): string;
  /**
   * Cancels a schedule of this session that has not fired: one this turn
   * made (then nothing is journaled), or one made earlier, by a turn or
   * through the API (TURN_SCHEDULE_CANCELLED in this turn's final commit).
   * Returns whether such a schedule was pending; `false` for one that
   * fired, was cancelled, or never existed.
   */
  export function cancelSchedule(id: string): boolean;
  /**
   * The tools of the deployment's MCP servers, each named
   * `<server>__<tool>`; `needs-approval` says whether the host gates its
   * calls. Listed once per turn (later calls answer from that list); a
   * server that cannot be reached is left out (its error is logged).
   */
  export function mcpTools(): Array<ToolSpec>;
  /**
   * Runs a call of an MCP tool that `tool-calls` handed over (and the
   * host allowed to run): calls the server and journals the call's
   * TOOL_RESULT, which the agent must not report again. A server that
   * fails, hangs past its timeout or is refused by the outbound policy is
   * an `error` result; a denied call is not sent and its result is `denied`.
   */
  export function mcpCall(toolCallId: string): McpResult;
  export type ToolCall = import('agenthost:agent/types@0.1.0').ToolCall;
  export type Step = import('agenthost:agent/types@0.1.0').Step;
  export type ToolStatus = import('agenthost:agent/types@0.1.0').ToolStatus;
  export type HistoryPage = import('agenthost:agent/types@0.1.0').HistoryPage;
  export type HostError = import('agenthost:agent/types@0.1.0').HostError;
  export type ToolSpec = import('agenthost:agent/types@0.1.0').ToolSpec;
  /**
   * How an MCP tool call the host made ended (its TOOL_RESULT is journaled).
   */
  export interface McpResult {
    /**
     * The result as JSON text: `{"content": [...], "structuredContent": ...}`,
     * or for an error or a denial a JSON string saying why.
     */
    output: string,
    status: ToolStatus,
  }
}
