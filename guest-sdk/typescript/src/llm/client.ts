/**
 * Calling the chat completions endpoint with `fetch` (over `wasi:http`):
 * the request body, one streamed exchange, the retries on 429, and the
 * provider's errors in words.
 *
 * @module
 */

import { isObject } from '../history.ts';
import { HttpError } from '../http.ts';
import type { Tool } from '../tools.ts';
import { completionsUrl, type ModelConfig } from './config.ts';
import { type ChatCompletionMessage } from './conversation.ts';
import { KeyRefused, MalformedStream, ProviderError, RateLimited, RequestFailed } from './errors.ts';
import { SseDecoder } from './sse.ts';
import { Assembler, type Completion } from './stream.ts';

/** At most this many requests per model call (the first and its retries). */
export const MAX_ATTEMPTS = 5;
/** At most this many seconds of waiting between retries, in total, per model call. */
export const MAX_BACKOFF = 30;
/** The first wait when the provider gives no `Retry-After`; then doubled. */
export const FIRST_BACKOFF = 1;

/** The JSON body of a streamed chat completions request. */
export function requestBody(
  config: ModelConfig,
  messages: ChatCompletionMessage[],
  tools: Iterable<Pick<Tool, 'name' | 'description' | 'parameters'>>,
): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model: config.model,
    messages,
    stream: true,
    stream_options: { include_usage: true },
  };
  const specs = offeredTools(tools);
  if (specs.length > 0) {
    body.tools = specs;
  }
  return body;
}

/** The tools as the model is offered them (OpenAI function tools). */
export function offeredTools(
  tools: Iterable<Pick<Tool, 'name' | 'description' | 'parameters'>>,
): { type: 'function'; function: { name: string; description: string; parameters: unknown } }[] {
  return [...tools].map((t) => ({
    type: 'function',
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));
}

/**
 * How long to wait (seconds) before attempt `attempt + 1`, after `waited`
 * seconds so far: the provider's `Retry-After` seconds if it sent them, else
 * 1 s, 2 s, 4 s... Returns `[undefined, why]` when not to retry.
 */
export function nextWait(attempt: number, retryAfter: string | null, waited: number): [number | undefined, string] {
  if (attempt >= MAX_ATTEMPTS) {
    return [undefined, `gave up after ${attempt} attempts`];
  }
  const given = retryAfter !== null && /^\d+$/.test(retryAfter.trim()) ? Number(retryAfter.trim()) : undefined;
  const wait = given ?? FIRST_BACKOFF * 2 ** (attempt - 1);
  if (waited + wait > MAX_BACKOFF) {
    return [undefined, `waiting ${Math.trunc(wait)} s more would exceed the ${MAX_BACKOFF} s retry budget`];
  }
  return [wait, ''];
}

/** The provider's own words: `error.message` of an OpenAI-style JSON error body, else the body's text (shortened), else the status alone. */
export function providerMessage(text: string): string {
  try {
    const body = JSON.parse(text) as unknown;
    if (isObject(body)) {
      const error = body.error;
      if (isObject(error) && typeof error.message === 'string') return error.message;
      if (typeof error === 'string') return error;
    }
  } catch {
    // not JSON: the text itself
  }
  const trimmed = text.trim();
  if (!trimmed) return '(no message)';
  const bytes = new TextEncoder().encode(trimmed);
  if (bytes.length <= 500) return trimmed;
  return `${new TextDecoder().decode(bytes.slice(0, 500)).replace(/\uFFFD+$/, '')}…`;
}

function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}

/**
 * One request. A request the host refused rejects with the SDK's
 * {@link HttpError} (the allowlist, an address), passed on as it is; any
 * other failure to exchange (unreachable...) is a {@link RequestFailed}.
 */
async function send(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (error) {
    if (error instanceof HttpError) {
      throw error;
    }
    throw new RequestFailed(new URL(url).origin, error instanceof Error ? error.message : String(error));
  }
}

/** Calls the model with `body`, handing each piece of text to `onText` as it arrives, and retrying (only) on 429. */
export async function complete(
  config: ModelConfig,
  body: Record<string, unknown>,
  onText: (text: string) => void,
): Promise<Completion> {
  const url = completionsUrl(config);
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'text/event-stream' };
  if (config.apiKey) {
    headers.authorization = `Bearer ${config.apiKey}`;
  }
  const payload = JSON.stringify(body);
  let waited = 0;
  for (let attempt = 1; ; attempt++) {
    const response = await send(url, { method: 'POST', headers, body: payload });
    if (response.ok) {
      return await finish(response, onText, new URL(url).origin);
    }
    const message = providerMessage(await response.text());
    const status = response.status;
    if (status === 401 || status === 403) {
      throw new KeyRefused(status, message);
    }
    if (status === 429) {
      const [wait, why] = nextWait(attempt, response.headers.get('retry-after'), waited);
      if (wait !== undefined) {
        await sleep(wait);
        waited += wait;
        continue;
      }
      throw new RateLimited(attempt, `${message} (${why})`);
    }
    throw new ProviderError(status, message);
  }
}

/** Reads a 2xx response's event stream into a completion; a malformed one that was not even declared as an event stream says what it was instead. */
async function finish(response: Response, onText: (text: string) => void, origin: string): Promise<Completion> {
  const assembler = new Assembler();
  const decoder = new SseDecoder();
  const text = new TextDecoder('utf-8', { fatal: true });
  const feed = (chunk: string): void => {
    for (const event of decoder.feed(chunk)) {
      const added = assembler.feed(event.data);
      if (added) onText(added);
    }
  };
  if (response.body) {
    const reader = response.body.getReader();
    for (;;) {
      let read: ReadableStreamReadResult<Uint8Array>;
      let chunk: string;
      try {
        read = await reader.read();
        chunk = read.done ? text.decode() : text.decode(read.value, { stream: true });
      } catch (error) {
        throw new RequestFailed(origin, error instanceof Error ? error.message : String(error));
      }
      feed(chunk);
      if (read.done) break;
    }
  }
  try {
    return assembler.finish();
  } catch (error) {
    const kind = (response.headers.get('content-type') ?? '').trim().toLowerCase();
    if (error instanceof MalformedStream && !kind.startsWith('text/event-stream')) {
      throw new MalformedStream(`${error.detail} (the response's content-type is \`${kind}\`)`);
    }
    throw error;
  }
}
