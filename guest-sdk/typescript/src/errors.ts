/**
 * What can go wrong in a turn, and how it reads in TURN_ERROR.
 *
 * An exception that leaves the handler ends the turn with a TURN_ERROR
 * (`agent_error`). For the SDK's own errors ({@link AgentError} and its
 * subclasses) the message is `error.message`, worded as the Rust SDK words
 * the same error; for any other exception it is `"<Name>: <message>"`
 * followed by the innermost frames of its stack.
 *
 * {@link ToolApprovalRequired} is not an error: it is how a turn suspends at
 * a gated tool call. Let it propagate (rethrow it if you catch everything);
 * once the host has suspended the turn, the SDK ends it cleanly whatever the
 * handler does next, and every further effect is refused.
 *
 * @module
 */

import type { ToolCall } from './tools.ts';

/** The base of the SDK's errors. Throw it to end a turn with exactly this message. */
export class AgentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Why the host refused an effect. */
export type HostErrorKind = 'invalid_order' | 'limit' | 'closed' | 'unavailable';

const WORDS: Record<HostErrorKind, string> = {
  invalid_order: 'invalid order',
  limit: 'limit reached',
  closed: 'closed',
  unavailable: 'unavailable',
};

/**
 * The host refused an effect (a message, a tool call, a history read...).
 *
 * `kind` is `"invalid_order"` (the effect breaks the journal's order rules),
 * `"limit"` (a size or count limit was reached), `"closed"` (the session has
 * ended or the turn is suspended) or `"unavailable"` (the host could not
 * record it). The turn usually cannot go on.
 */
export class HostError extends AgentError {
  readonly kind: HostErrorKind;
  readonly detail: string;

  constructor(kind: HostErrorKind, detail: string) {
    super(`the host refused an effect: ${WORDS[kind] ?? kind}: ${detail}`);
    this.kind = kind;
    this.detail = detail;
  }
}

/** The input (or a tool's arguments) is not what the agent expects. */
export class BadInput extends AgentError {
  readonly detail: string;

  constructor(detail: string) {
    super(`bad input: ${detail}`);
    this.detail = detail;
  }
}

/**
 * A gated tool call now waits for a human decision: the turn is suspended.
 *
 * {@link Turn.runTools} throws it. Let it propagate: the SDK ends the turn
 * without an error, and the agent resumes in a new turn whose `decision` is
 * set, where the SDK runs the suspended step before the handler is called.
 */
export class ToolApprovalRequired extends Error {
  readonly call: ToolCall;

  constructor(call: ToolCall) {
    super(`tool call ${call.id ?? '?'} (${call.name}) waits for approval`);
    this.name = 'ToolApprovalRequired';
    this.call = call;
  }
}
