/**
 * Declared models: the manifest's `[llm.<alias>]` models, which the host
 * calls with their keys (the agent never sees a key). {@link declaredModels}
 * lists the aliases; {@link completeDeclared} asks one for a completion, and
 * `ChatLoop` uses it when any model is declared.
 *
 * The host streams the model's text straight into the turn's assistant
 * message (`MESSAGE_START` / `MESSAGE_DELTA` / `MESSAGE_END`): the agent must
 * not write it again. It journals each request (`LLM_CALL`, `LLM_RESULT`)
 * and fails over to the alias's `fallbacks` before the first token
 * (docs/llm.md).
 *
 * ```ts
 * import { completeDeclared } from '@agenthost/sdk/llm';
 *
 * const done = completeDeclared('main', [{ role: 'user', content: 'Hi' }]);
 * console.log(done.text, done.servedBy, done.outputTokens);
 * ```
 *
 * @module
 */

import { LlmRefused, llmAliases, llmComplete } from '../host.ts';
import { ConfigError, DeclaredModelFailed } from './errors.ts';
import type { ModelCall } from './stream.ts';

/** What a declared model answered. Its text is already in the turn's journal (the message `messageId`). */
export interface DeclaredCompletion {
  /** The message the text went to; `undefined` when the model wrote no text. */
  messageId: string | undefined;
  /** The whole text, already streamed by the host (do not write it again). */
  text: string;
  /** The calls the model asked for: hand them to the host as the step's calls. */
  toolCalls: ModelCall[];
  /** `stop`, `length`, `tool_calls`, `content_filter`, ... */
  finishReason: string;
  /** The alias that answered (the asked one, or a fallback). */
  servedBy: string;
  inputTokens: number;
  outputTokens: number;
}

/** How a declared completion is asked for, besides its alias and messages. */
export interface DeclaredOptions {
  /** OpenAI function tools (`{type: 'function', function: {name, description, parameters}}`). */
  tools?: unknown[];
  /** Further request fields (`temperature`, ...); the host sets `model`, `stream`, `messages`, `tools` and the output cap. */
  parameters?: Record<string, unknown>;
}

/** The aliases of the manifest's `[llm.<alias>]` models, in name order (empty when it declares none). */
export function declaredModels(): string[] {
  return llmAliases();
}

/** The alias a `ChatLoop` uses when none is set: `main` if declared, else the first declared; `undefined` when none is. */
export function defaultAlias(): string | undefined {
  const aliases = declaredModels();
  return aliases.includes('main') ? 'main' : aliases[0];
}

/**
 * One completion of `alias` through the host; `messages` is the conversation
 * as OpenAI chat messages.
 *
 * Throws a {@link ConfigError} for an unknown alias or a malformed request, a
 * {@link DeclaredModelFailed} when the model failed (the provider's words),
 * and a `HostError` when the host refused (kind `closed`: the host suspended
 * or closed the turn).
 */
export function completeDeclared(alias: string, messages: unknown[], options: DeclaredOptions = {}): DeclaredCompletion {
  let done;
  try {
    done = llmComplete(
      alias,
      JSON.stringify(messages),
      JSON.stringify(options.tools ?? []),
      JSON.stringify(options.parameters ?? {}),
    );
  } catch (error) {
    if (error instanceof LlmRefused) {
      throw error.kind === 'failed' ? new DeclaredModelFailed(error.detail) : new ConfigError(error.detail);
    }
    throw error;
  }
  return {
    messageId: done.messageId,
    text: done.text,
    toolCalls: done.toolCalls.map(([id, name, args]) => ({ id, name, arguments: args })),
    finishReason: done.finishReason,
    servedBy: done.servedBy,
    inputTokens: done.inputTokens,
    outputTokens: done.outputTokens,
  };
}
