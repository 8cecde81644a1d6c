/**
 * `fetch` that says why the host refused a request. componentize-js's
 * `fetch` rejects a request the host refused with only `NetworkError when
 * attempting to fetch resource`; the host journals why (an
 * `HTTP_REQUEST_DENIED` event, docs/outbound.md). {@link installFetch}
 * wraps the global `fetch`: when it rejects, the SDK reads this turn's
 * journal, and if the host refused a request to that origin (one not yet
 * explained), the promise rejects with an {@link HttpError} saying so, as
 * the Rust and Python SDKs word it: {@link RequestDenied} (not on the
 * outbound allowlist), {@link AddressProhibited} (a non-public address),
 * or an `HttpError` with the host's reason (DNS). Any other failure
 * rejects as `fetch` made it. The journal is read only when a request
 * fails.
 *
 * @module
 */

import { AgentError } from './errors.ts';
import { History, isObject, type Page, readFromHost } from './history.ts';
import * as journal from './journal.ts';

/** A request the host refused, with its origin and the journal's reason. */
export class HttpError extends AgentError {
  constructor(
    /** The origin the request was for, such as `https://api.example.com`. */
    readonly origin: string,
    /** The host's reason, as `HTTP_REQUEST_DENIED` journals it. */
    readonly reason: string,
    message = `the host refused the request to ${origin}: ${reason}`,
  ) {
    super(message);
  }
}

/** The origin is not on the deployment's outbound allowlist. */
export class RequestDenied extends HttpError {
  constructor(origin: string, reason: string) {
    super(
      origin,
      reason,
      `the host refused the request to ${origin}: it is not on this deployment's outbound allowlist ([outbound] allow in agenthost.toml)`,
    );
  }
}

/** The origin resolves only to private or loopback addresses, which the server does not let agents reach. */
export class AddressProhibited extends HttpError {
  constructor(origin: string, reason: string) {
    super(
      origin,
      reason,
      `the host refused to connect to ${origin}: it resolves to a private or loopback address, which this server does not let agents reach`,
    );
  }
}

/** The error for a journaled refusal, by its reason. */
export function refusalError(origin: string, reason: string): HttpError {
  if (reason.includes('outbound allowlist')) {
    return new RequestDenied(origin, reason);
  }
  if (reason.includes('--outbound-allow-private')) {
    return new AddressProhibited(origin, reason);
  }
  return new HttpError(origin, reason);
}

/** The ids of refusals already explained in this instance (one turn). */
const explained = new Set<string>();

function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return a === b;
  }
}

/**
 * The latest refusal of a request to `origin` in this turn's journal that
 * no earlier failure was explained by, or `undefined` (also when the
 * journal cannot be read).
 */
export function journaledRefusal(
  origin: string,
  read: (after: bigint | undefined, limit: number) => Page = readFromHost,
): HttpError | undefined {
  let found: { id: string; reason: string } | undefined;
  try {
    for (const event of new History(read)) {
      if (event.eventType === journal.TURN_STARTED) {
        found = undefined; // only this turn's
        continue;
      }
      const payload = event.payload;
      if (event.eventType !== journal.HTTP_REQUEST_DENIED || !isObject(payload)) {
        continue;
      }
      const { request_id: id, origin: refused, reason } = payload;
      if (typeof id === 'string' && typeof refused === 'string' && !explained.has(id) && sameOrigin(refused, origin)) {
        found = { id, reason: typeof reason === 'string' ? reason : 'refused' };
      }
    }
  } catch {
    return undefined;
  }
  if (!found) {
    return undefined;
  }
  explained.add(found.id);
  return refusalError(origin, found.reason);
}

function originOf(input: unknown): string | undefined {
  try {
    const url = typeof input === 'string' || input instanceof URL ? String(input) : (input as { url: string }).url;
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/** Marks the wrapper, so it is installed once. */
const WRAPPED = Symbol.for('agenthost.fetch');

/** Wraps the global `fetch` (once) so a refused request says why (see the module). */
export function installFetch(): void {
  const global = globalThis as { fetch?: typeof fetch };
  const original = global.fetch;
  if (typeof original !== 'function' || WRAPPED in original) {
    return;
  }
  const wrapped = async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
    try {
      return await original(input, init);
    } catch (error) {
      const origin = originOf(input);
      throw (origin !== undefined && journaledRefusal(origin)) || error;
    }
  };
  Object.defineProperty(wrapped, WRAPPED, { value: true });
  global.fetch = wrapped as typeof fetch;
}
