declare module 'agenthost:agent/types@0.1.0' {
  /**
   * A tool the agent offers (to a model, or to its own logic).
   */
  export interface ToolSpec {
    /**
     * `[A-Za-z0-9_-]{1,64}`, unique within the agent.
     */
    name: string,
    description: string,
    /**
     * JSON Schema of the arguments, as JSON text (an object).
     */
    parameters: string,
    /**
     * Declared in code: calls of this tool wait for a human decision.
     */
    needsApproval: boolean,
  }
  /**
   * What `describe` returns: the agent's routes and tools.
   */
  export interface Description {
    /**
     * Routes such as `/chat`: each starts with `/`, unique.
     */
    routes: Array<string>,
    tools: Array<ToolSpec>,
  }
  /**
   * One tool call proposed by the agent (or its model).
   */
  export interface ToolCall {
    /**
     * Unique within the session; the tool's idempotency key.
     */
    toolCallId: string,
    name: string,
    /**
     * Arguments as JSON text.
     */
    arguments: string,
  }
  /**
   * A human's decision on a gated tool call, handed to the resumed turn.
   */
  export interface Decision {
    approved: boolean,
    /**
     * Who decided (free text attribution).
     */
    approver: string,
    /**
     * The call that was waiting for the decision.
     */
    pendingToolCall: ToolCall,
    /**
     * Every call of the suspended step, in the order the agent proposed
     * them (the pending call included). None of them has run: the
     * resumed turn runs the ungated ones and the pending one if approved,
     * and reports a result for each.
     */
    step: Array<ToolCall>,
  }
  /**
   * Why this turn runs.
   */
  export type Reason = ReasonInput | ReasonApprovalDecision;
  /**
   * A new input: the session was created or received a follow-up input.
   */
  export interface ReasonInput {
    tag: 'input',
  }
  /**
   * A decision on the gated tool call that suspended the previous turn.
   */
  export interface ReasonApprovalDecision {
    tag: 'approval-decision',
    val: Decision,
  }
  /**
   * Everything a turn starts from.
   */
  export interface Turn {
    sessionId: string,
    /**
     * 1 for the session's first turn, then 2, 3, ...
     */
    turn: number,
    route: string,
    reason: Reason,
    /**
     * The input as JSON text (for a resumed turn: the input of the turn it resumes).
     */
    input: string,
  }
  /**
   * One journal entry as the agent sees it.
   */
  export interface Event {
    seq: bigint,
    /**
     * `MESSAGE_END`, `TOOL_CALL`, ... (see docs/events.md).
     */
    eventType: string,
    /**
     * The payload as JSON text.
     */
    payload: string,
  }
  /**
   * A page of the session's journal, oldest first.
   */
  export interface HistoryPage {
    events: Array<Event>,
    /**
     * Pass as `after` to read the next page; none when this page is the last.
     */
    next?: bigint,
  }
  /**
   * What the host decides when a step's tool calls are handed over.
   */
  export type Step = StepRun | StepSuspend;
  /**
   * No call is gated: run every call of the step, then report each result.
   */
  export interface StepRun {
    tag: 'run',
  }
  /**
   * This call needs a human decision: the turn ends now. The agent must
   * return from `handle` without further effects; it resumes in a new
   * turn whose reason is `approval-decision`.
   */
  export interface StepSuspend {
    tag: 'suspend',
    val: ToolCall,
  }
  /**
   * How a tool call ended.
   * # Variants
   * 
   * ## `"ok"`
   * 
   * ## `"error"`
   * 
   * ## `"denied"`
   * 
   * A human denied the call; the output says so.
   */
  export type ToolStatus = 'ok' | 'error' | 'denied';
  /**
   * An effect the host refused. The turn may go on, but usually should not.
   */
  export type HostError = HostErrorInvalidOrder | HostErrorLimit | HostErrorClosed | HostErrorUnavailable;
  /**
   * The call breaks the journal's order rules (for example a delta to a
   * message that is not open, or a result for an unknown tool call).
   */
  export interface HostErrorInvalidOrder {
    tag: 'invalid-order',
    val: string,
  }
  /**
   * A size or count limit was reached.
   */
  export interface HostErrorLimit {
    tag: 'limit',
    val: string,
  }
  /**
   * Nothing more can be written: the session has ended or the turn is suspended.
   */
  export interface HostErrorClosed {
    tag: 'closed',
    val: string,
  }
  /**
   * The host could not record the effect (storage failure).
   */
  export interface HostErrorUnavailable {
    tag: 'unavailable',
    val: string,
  }
}
