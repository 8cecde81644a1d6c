/**
 * The session's journal as the agent reads it: {@link History} pages
 * through `read-history`; {@link Event} and {@link ChatMessage} are what it
 * yields; {@link EndUser} is who the session serves, from its first event.
 *
 * @module
 */

import { AgentError } from './errors.ts';
import * as host from './host.ts';
import * as journal from './journal.ts';

/** How many events {@link History} asks for per page (the host may cap it lower). */
export const PAGE_SIZE = 256;

/** A finished message of the transcript (from a MESSAGE_END event). */
export interface ChatMessage {
  /** `"user"` (the client's text inputs), `"assistant"` (the agent), or a role this SDK does not know. */
  role: string;
  text: string;
}

/** One journal event. */
export interface Event {
  /** Its position in the session's journal (increasing). */
  seq: bigint;
  /** `SESSION_CREATED`, `MESSAGE_END`, `TOOL_CALL`, ... (docs/events.md). */
  eventType: string;
  /** The payload, as JSON data. */
  payload: unknown;
}

/** The finished message an event carries, if it is a MESSAGE_END. */
export function chatMessage(event: Event): ChatMessage | undefined {
  if (event.eventType !== journal.MESSAGE_END || !isObject(event.payload)) {
    return undefined;
  }
  const { role, text } = event.payload;
  if (typeof role !== 'string' || typeof text !== 'string') {
    return undefined;
  }
  return { role, text };
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * The end user a session belongs to (docs/end-users.md): the person who
 * created it with an end-user token.
 */
export interface EndUser {
  /** Their id in the app (the token's user, or its `sub`). */
  id: string;
  /**
   * The claims of their token that the app's manifest lists in
   * `[end_users] claims` (the others never reach the agent); empty when it
   * lists none.
   */
  claims: Record<string, unknown>;
}

/** One page: the events and the `after` of the next page (none on the last). */
export interface Page {
  events: Event[];
  next: bigint | undefined;
}

/** Reads one page from the host, each payload parsed. */
export function readFromHost(after: bigint | undefined, limit: number): Page {
  const page = host.readHistory(after, limit);
  const events = page.events.map(([seq, eventType, payload]) => {
    try {
      return { seq, eventType, payload: JSON.parse(payload) as unknown };
    } catch (error) {
      throw new AgentError(
        `the host sent event ${seq} with a payload that is not JSON: ${(error as Error).message}`,
      );
    }
  });
  return { events, next: page.next };
}

/**
 * The session's journal, oldest first, read page by page as it is iterated
 * (a `for...of` loop, or spread it). It includes this turn's own events so
 * far (its TURN_STARTED, the input's user message, and whatever the agent
 * has written).
 *
 * Iterating throws the host's error (a {@link HostError}) if a page cannot
 * be read.
 */
export class History implements Iterable<Event> {
  readonly #read: (after: bigint | undefined, limit: number) => Page;

  /** @internal Use {@link Turn.history}. */
  constructor(read: (after: bigint | undefined, limit: number) => Page = readFromHost) {
    this.#read = read;
  }

  *[Symbol.iterator](): Iterator<Event> {
    let after: bigint | undefined = undefined;
    for (;;) {
      const { events, next } = this.#read(after, PAGE_SIZE);
      yield* events;
      // Stop on the last page, and on a host that makes no progress.
      const progress = next !== undefined && (after === undefined || next > after);
      if (!progress || events.length === 0) {
        return;
      }
      after = next;
    }
  }

  /** The transcript: every finished message (MESSAGE_END), oldest first. */
  messages(): ChatMessage[] {
    const out: ChatMessage[] = [];
    for (const event of this) {
      const message = chatMessage(event);
      if (message) {
        out.push(message);
      }
    }
    return out;
  }
}

/**
 * The end user of the session's first event (SESSION_CREATED), read with one
 * `read-history` call; `null` when the session was created with an API key.
 */
export function readEndUser(
  read: (after: bigint | undefined, limit: number) => Page = readFromHost,
): EndUser | null {
  const first = read(undefined, 1).events[0];
  if (first === undefined) {
    throw new AgentError("the session's journal has no SESSION_CREATED event");
  }
  if (first.eventType !== journal.SESSION_CREATED || !isObject(first.payload)) {
    throw new AgentError(`the session's journal opens with ${first.eventType} instead of SESSION_CREATED`);
  }
  const user = first.payload.end_user;
  if (user === undefined || user === null) {
    return null;
  }
  const claims = isObject(user) ? (user.claims ?? {}) : undefined;
  if (!isObject(user) || typeof user.id !== 'string' || !isObject(claims)) {
    throw new AgentError(`SESSION_CREATED has a malformed end_user: ${JSON.stringify(user)}`);
  }
  return { id: user.id, claims };
}
