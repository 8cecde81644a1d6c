/**
 * The journal as a guest reads it: every event type's name and its
 * payload's fields (docs/events.md). Generated from the host's event payload types (host/src/journal/payloads.rs) by `cargo test -p agenthost --lib guest_journal`: do not edit; `UPDATE_GOLDEN=1` rewrites it.
 */

/** The event type of {@link SessionCreated}. */
export const SESSION_CREATED = 'SESSION_CREATED';
/** The event type of {@link TurnStarted}. */
export const TURN_STARTED = 'TURN_STARTED';
/** The event type of {@link MessageStart}. */
export const MESSAGE_START = 'MESSAGE_START';
/** The event type of {@link MessageDelta}. */
export const MESSAGE_DELTA = 'MESSAGE_DELTA';
/** The event type of {@link MessageEnd}. */
export const MESSAGE_END = 'MESSAGE_END';
/** The event type of {@link ToolCall}. */
export const TOOL_CALL = 'TOOL_CALL';
/** The event type of {@link ToolResult}. */
export const TOOL_RESULT = 'TOOL_RESULT';
/** The event type of {@link ToolApprovalRequired}. */
export const TOOL_APPROVAL_REQUIRED = 'TOOL_APPROVAL_REQUIRED';
/** The event type of {@link ToolApprovalGranted}. */
export const TOOL_APPROVAL_GRANTED = 'TOOL_APPROVAL_GRANTED';
/** The event type of {@link ToolApprovalDenied}. */
export const TOOL_APPROVAL_DENIED = 'TOOL_APPROVAL_DENIED';
/** The event type of {@link TurnError}. */
export const TURN_ERROR = 'TURN_ERROR';
/** The event type of {@link TurnEnded}. */
export const TURN_ENDED = 'TURN_ENDED';
/** The event type of {@link SessionEnded}. */
export const SESSION_ENDED = 'SESSION_ENDED';
/** The event type of {@link HttpRequest}. */
export const HTTP_REQUEST = 'HTTP_REQUEST';
/** The event type of {@link HttpRequestDenied}. */
export const HTTP_REQUEST_DENIED = 'HTTP_REQUEST_DENIED';
/** The event type of {@link HttpResponse}. */
export const HTTP_RESPONSE = 'HTTP_RESPONSE';
/** The event type of {@link InputQueued}. */
export const INPUT_QUEUED = 'INPUT_QUEUED';
/** The event type of {@link TurnScheduled}. */
export const TURN_SCHEDULED = 'TURN_SCHEDULED';
/** The event type of {@link TurnScheduleCancelled}. */
export const TURN_SCHEDULE_CANCELLED = 'TURN_SCHEDULE_CANCELLED';
/** The event type of {@link LlmCall}. */
export const LLM_CALL = 'LLM_CALL';
/** The event type of {@link LlmResult}. */
export const LLM_RESULT = 'LLM_RESULT';
/** The event type of {@link BudgetReached}. */
export const BUDGET_REACHED = 'BUDGET_REACHED';

/** `SESSION_CREATED`: always seq 0. */
export interface SessionCreated {
  /** The app's slug. */
  app: string;
  app_id: string;
  deployment_id: string;
  deployment_version: number;
  /** The end user the session belongs to, when one created it (with the claims the app's `[end_users] claims` lets through). */
  end_user?: unknown | null;
  /** The input exactly as the client sent it (`null` when omitted). */
  input: unknown;
  route: string;
}

/** `TURN_STARTED`. */
export interface TurnStarted {
  /** The turn's input; for an approval decision, the suspended turn's input. */
  input: unknown;
  reason: unknown;
  turn: number;
}

/** `MESSAGE_START`. */
export interface MessageStart {
  /** `msg_` and 32 hex digits. */
  message_id: string;
  /** One of `user`, `assistant`. */
  role: string;
}

/** `MESSAGE_DELTA`. */
export interface MessageDelta {
  delta: unknown;
  message_id: string;
}

/** `MESSAGE_END`. */
export interface MessageEnd {
  /** Only when the host closed the message at the end of its turn: `true` if the turn failed, `false` if it ended normally. */
  incomplete?: boolean | null;
  message_id: string;
  /** One of `user`, `assistant`. */
  role: string;
  /** The message's full text (its deltas, concatenated). */
  text: string;
}

/** `TOOL_CALL`. */
export interface ToolCall {
  arguments: unknown;
  /** The `[mcp.<name>]` server whose tool this is (named `<server>__<tool>`): the host calls it and journals its result. */
  mcp_server?: string | null;
  name: string;
  tool_call_id: string;
}

/** `TOOL_RESULT`. */
export interface ToolResult {
  name: string;
  output: unknown;
  /** One of `ok`, `error`, `denied`. */
  status: string;
  tool_call_id: string;
}

/** `TOOL_APPROVAL_REQUIRED`: the turn is suspended; its last event. */
export interface ToolApprovalRequired {
  arguments: unknown;
  /** When the call is denied by `timeout` unless a human decided first (RFC 3339); absent when the approval may wait forever. */
  expires_at?: string | null;
  /** What gates the tool, in this order: `code`, `manifest`, `policy`. */
  gated_by: string[];
  name: string;
  /** The agent's explanation of the step. */
  reason?: string | null;
  tool_call_id: string;
}

/** `TOOL_APPROVAL_GRANTED`. */
export interface ToolApprovalGranted {
  /** Decided by a webhook's decision link: a keyed hash of the address it was used from (docs/webhooks.md, "Decision links"). */
  address_hash?: string | null;
  /** Who decided: the request's `approver`, else the deciding key's name. */
  approver: string;
  /** The arguments the human approved the call with, instead of the agent's: the tool runs with these. Absent when not edited. */
  arguments?: unknown;
  /** The id of the API key that decided. */
  key_id: string;
  /** A note from the human to the agent. */
  message?: string | null;
  name: string;
  /** The agent's arguments, when the human edited them. */
  original_arguments?: unknown;
  /** The result the human gave in place of the tool's: the tool is not run and the agent receives this as its output. */
  result?: unknown;
  tool_call_id: string;
}

/** `TOOL_APPROVAL_DENIED`: the fields of `TOOL_APPROVAL_GRANTED` but the edits (`arguments`, `original_arguments`, `result`). */
export interface ToolApprovalDenied {
  /** As in `TOOL_APPROVAL_GRANTED`. */
  address_hash?: string | null;
  approver: string;
  key_id: string;
  /** A note from the human to the agent, for example why it was denied. */
  message?: string | null;
  name: string;
  tool_call_id: string;
}

/** `TURN_ERROR`. */
export interface TurnError {
  /** One of `agent_error`, `panic`, `trap`, `deadline`, `cpu_limit`, `memory_limit`, `invalid_order`, `limit`, `unanswered_tool_call`, `multiple_gated_calls`, `storage`, `deployment_unavailable`, `missing_secret`, `host_restarted`, `cancelled`, `internal`, `output_limit`. */
  kind: string;
  /** Human-readable, at most 4096 bytes. */
  message: string;
  turn: number;
}

/** `TURN_ENDED`. */
export interface TurnEnded {
  turn: number;
}

/** `SESSION_ENDED`: the session's last event. */
export interface SessionEnded {
  /** The key that ended it, with `reason`. */
  key_id?: string | null;
  /** Why an operator or client ended it (`POST /sessions/{id}/end`); absent when the agent ended it. */
  reason?: string | null;
}

/** `HTTP_REQUEST`: committed before the request leaves. */
export interface HttpRequest {
  method: string;
  /** `scheme://host[:port]`. */
  origin: string;
  /** The path, without the query string, secrets redacted. */
  path: string;
  /** `http_<turn>_<n>`. */
  request_id: string;
}

/** `HTTP_REQUEST_DENIED`. */
export interface HttpRequestDenied {
  method: string;
  origin: string;
  path: string;
  /** Why the host refused. */
  reason: string;
  request_id: string;
}

/** `HTTP_RESPONSE`: how a request that left ended. */
export interface HttpResponse {
  /** Response body bytes the agent received. */
  bytes: number;
  /** From the commit of `HTTP_REQUEST` to the end, one decimal. */
  duration_ms: number;
  /** `null` when the body was read to its end. */
  error?: string | null;
  request_id: string;
  /** `null` when no response head arrived. */
  status?: number | null;
}

/** `INPUT_QUEUED`: an input sent with `on_busy` `enqueue` or `interrupt` while the session was busy; it runs as a later turn of its own, whose TURN_STARTED carries it again (docs/api.md, "Input while a turn runs"). */
export interface InputQueued {
  /** The input exactly as the client sent it. */
  input: unknown;
  /** `inq_` and 32 hex digits. */
  input_id: string;
  /** `true` for `on_busy` `interrupt`: the running turn is cancelled and this input runs next, before inputs queued earlier. */
  interrupt?: boolean;
  /** Inputs queued before it runs, counted from 1 (1: it runs next). */
  position: number;
}

/** `TURN_SCHEDULED`: the agent scheduled an input as a later turn of its session (`schedule` of `wit/agent.wit`); journaled in the turn's final commit, just before its TURN_ENDED (or TOOL_APPROVAL_REQUIRED), so only a turn that ends well schedules (docs/schedules.md). */
export interface TurnScheduled {
  /** When it is due, RFC 3339 in UTC, to the millisecond. */
  at: string;
  /** The input the later turn gets. */
  input: unknown;
  /** The schedule's id, as `GET /sessions/{id}/schedules` lists it and the TURN_STARTED it starts names it. */
  schedule_id: string;
}

/** `TURN_SCHEDULE_CANCELLED`: the agent cancelled a schedule of its session made before this turn (`cancel-schedule`); journaled in the turn's final commit, like TURN_SCHEDULED. */
export interface TurnScheduleCancelled {
  schedule_id: string;
}

/** `LLM_CALL`: the host is about to send a completion request to a declared model (`[llm.<alias>]`, docs/llm.md); committed before the request leaves. Each request is its own LLM_CALL (a fallback's too), followed by its LLM_RESULT. */
export interface LlmCall {
  /** The alias whose endpoint is called. */
  alias: string;
  /** `llm_<turn>_<n>`. */
  call_id: string;
  model: string;
  /** `openai` or `anthropic`. */
  provider: string;
}

/** `LLM_RESULT`: how the request of an LLM_CALL ended. What the model said is in the MESSAGE_* events it streamed into and the TOOL_CALLs the agent handed over. */
export interface LlmResult {
  call_id: string;
  /** In the unit of the alias's `price`, when it declares one. */
  cost?: number | null;
  /** Why the request failed (a status, a connection error, a cut stream). */
  error?: string | null;
  /** `stop`, `length`, `tool_calls`, `content_filter`, or `error`. */
  finish_reason: string;
  /** The alias that answered; absent when the request failed. */
  served_by?: string | null;
  usage: unknown;
}

/** `BUDGET_REACHED`: a declared-model call the LLM budget cannot cover; nothing was sent, and the turn ends here with the session `paused_budget` until the budget is raised (docs/llm.md "Budgets"). */
export interface BudgetReached {
  /** The LLM_CALL id the refused request would have had. */
  call_id?: string | null;
  limit: number;
  /** The refused call's worst case. */
  needed: number;
  /** Held by calls not settled yet. */
  reserved: number;
  /** `session` (the only scope so far). */
  scope: string;
  /** Spent by settled calls (and worst cases of calls that never reported). */
  spent: number;
  /** `tokens` or `cost`: the unit of the numbers below. */
  unit: string;
}
