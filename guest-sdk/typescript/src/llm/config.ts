/**
 * {@link ModelConfig}: which OpenAI-compatible API to call, with which key
 * and model, read from the turn's environment (where the host puts the
 * secrets the manifest declares).
 *
 * @module
 */

import { ConfigError } from './errors.ts';

/** The base URL used when `OPENAI_BASE_URL` is not set. */
export const DEFAULT_BASE_URL = 'https://api.openai.com/v1';

/** Where and how to call the model. */
export interface ModelConfig {
  /** The model's name, such as `gpt-4o-mini`. */
  model: string;
  /** Requests go to `{baseUrl}/chat/completions`; its origin must be on the deployment's outbound allowlist. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <key>` when set. */
  apiKey?: string;
}

/**
 * Reads `OPENAI_BASE_URL` (default {@link DEFAULT_BASE_URL}), `OPENAI_API_KEY`
 * (optional) and `OPENAI_MODEL` (required) from `env` (a turn's `env`).
 * Declare them in the manifest's `[agent] secrets` and set them with
 * `PUT /secrets/<NAME>`. Empty values count as unset.
 */
export function configFromEnv(env: Readonly<Record<string, string | undefined>>): ModelConfig {
  const value = (name: string): string | undefined => env[name]?.trim() || undefined;
  const model = value('OPENAI_MODEL');
  if (model === undefined) {
    throw new ConfigError(
      'OPENAI_MODEL is not set: declare it in `[agent] secrets` of agenthost.toml and set it with PUT /secrets/OPENAI_MODEL',
    );
  }
  return { model, baseUrl: value('OPENAI_BASE_URL') ?? DEFAULT_BASE_URL, apiKey: value('OPENAI_API_KEY') };
}

/** `{baseUrl}/chat/completions`. */
export function completionsUrl(config: ModelConfig): string {
  return `${config.baseUrl.replace(/\/+$/, '')}/chat/completions`;
}
