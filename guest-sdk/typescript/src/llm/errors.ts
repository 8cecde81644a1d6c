/**
 * What can go wrong when calling the model ({@link LlmError} and its cases),
 * and why a model stopped (`finish_reason`). The messages are the Rust
 * SDK's, word for word.
 *
 * @module
 */

import { AgentError } from '../errors.ts';

export const STOP = 'stop';
export const TOOL_CALLS = 'tool_calls';
export const LENGTH = 'length';
export const CONTENT_FILTER = 'content_filter';

/** The wire value, with the older `function_call` read as `tool_calls`. */
export function parseFinishReason(value: string): string {
  return value === 'function_call' ? TOOL_CALLS : value;
}

/** Why calling the model failed. Thrown from a turn, it ends the turn with a TURN_ERROR carrying its text. */
export class LlmError extends AgentError {}

/** The configuration is missing or invalid (an environment variable...). */
export class ConfigError extends LlmError {
  constructor(readonly detail: string) {
    super(`cannot call the model: ${detail}`);
  }
}

/** A declared model (`[llm.<alias>]`) failed: every alias tried, or one that failed after its first token (the host's words). */
export class DeclaredModelFailed extends LlmError {
  constructor(readonly detail: string) {
    super(`the declared model failed: ${detail}`);
  }
}

/** The provider refused the API key (HTTP 401 or 403). */
export class KeyRefused extends LlmError {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(
      `the model provider refused the API key (HTTP ${status}): ${detail}; ` +
        'check the OPENAI_API_KEY secret (PUT /secrets/OPENAI_API_KEY)',
    );
  }
}

/** The provider kept answering 429 Too Many Requests. */
export class RateLimited extends LlmError {
  constructor(
    readonly attempts: number,
    readonly detail: string,
  ) {
    super(`the model provider is rate limiting this agent (HTTP 429 to each of ${attempts} attempts): ${detail}`);
  }
}

/** The provider answered with another error status (5xx, 400, 404...). */
export class ProviderError extends LlmError {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(`the model provider answered HTTP ${status}: ${detail}`);
  }
}

/** The provider reported an error inside its response stream. */
export class StreamError extends LlmError {
  constructor(readonly detail: string) {
    super(`the model provider reported an error in its response stream: ${detail}`);
  }
}

/** The response stream is not what an OpenAI-compatible API sends. */
export class MalformedStream extends LlmError {
  constructor(readonly detail: string) {
    super(`the model's response stream is malformed: ${detail}`);
  }
}

/** The model stopped without a usable answer (`length`, `content_filter`). */
export class Stopped extends LlmError {
  constructor(readonly finishReason: string) {
    super(
      finishReason === LENGTH
        ? "the model's answer was cut off: it reached its output token limit (finish_reason `length`)"
        : finishReason === CONTENT_FILTER
          ? "the provider's content filter stopped the model's answer (finish_reason `content_filter`)"
          : `the model stopped without an answer (finish_reason \`${finishReason}\`)`,
    );
  }
}

/** The model still asked for tools after `maxRounds` rounds. */
export class TooManyRounds extends LlmError {
  constructor(readonly maxRounds: number) {
    super(
      `the model did not give a final answer within ${maxRounds} rounds of tool calls (ChatLoop maxRounds)`,
    );
  }
}

/**
 * The request to the model could not be exchanged: connection, TLS, a
 * response cut off... `fetch` gives the reason in its own words. (A request
 * the host refused, such as an origin not on the outbound allowlist, is the
 * SDK's `HttpError` instead, which says so.)
 */
export class RequestFailed extends LlmError {
  constructor(
    readonly origin: string,
    readonly detail: string,
  ) {
    super(
      `the request to ${origin} failed: ${detail} (is ${origin} on this deployment's outbound allowlist, [outbound] allow in agenthost.toml?)`,
    );
  }
}
