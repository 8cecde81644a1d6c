/**
 * A model loop for agents: {@link ChatLoop} calls an OpenAI-compatible chat
 * completions API, streams the model's text into the session as an assistant
 * message, hands the tool calls it asks for to the host (so gated ones wait
 * for a human), runs the others, and calls the model again until it answers.
 *
 * ```ts
 * import { Agent } from '@agenthost/sdk';
 * import { ChatLoop } from '@agenthost/sdk/llm';
 *
 * const agent = new Agent({ routes: ['/chat'] });
 * const loop = new ChatLoop('You are a helpful assistant.');
 * agent.handler((turn) => loop.run(turn));
 * export default agent;
 * ```
 *
 * The model is one the manifest declares, when it declares any
 * (`[llm.<alias>]`, docs/llm.md): the host holds its key, sends the request,
 * streams the text straight into the turn's message, journals `LLM_CALL` /
 * `LLM_RESULT` and fails over to the alias's `fallbacks`. The loop uses the
 * alias given as `new ChatLoop(prompt, { alias })`, else `main` if declared,
 * else the first declared ({@link declaredModels}); {@link completeDeclared}
 * calls a declared model directly.
 *
 * Otherwise the model is called over the agent's own outbound HTTP and
 * configured from the turn's environment ({@link configFromEnv}): declare
 * `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `OPENAI_MODEL` in the manifest's
 * `[agent] secrets`, and put the API's origin in its `[outbound] allow`.
 *
 * Each call rebuilds the conversation from the session's journal (nothing is
 * kept anywhere else). Compatibility is claimed for the chunk shapes the
 * SDK's tests replay (those OpenAI documents: text deltas, tool-call
 * fragments keyed by `index`, parallel calls, a usage-only last chunk,
 * `[DONE]`).
 *
 * @module
 */

import { HostError } from '../errors.ts';
import type { Message } from '../message.ts';
import type { ToolCall } from '../tools.ts';
import type { Turn } from '../turn.ts';
import { complete, offeredTools, requestBody } from './client.ts';
import { configFromEnv, type ModelConfig } from './config.ts';
import { rebuild } from './conversation.ts';
import { completeDeclared, defaultAlias } from './declared.ts';
import { CONTENT_FILTER, LENGTH, Stopped, TooManyRounds } from './errors.ts';
import type { Completion, ModelCall } from './stream.ts';

export {
  completeDeclared,
  type DeclaredCompletion,
  type DeclaredOptions,
  declaredModels,
  defaultAlias,
} from './declared.ts';
export { completionsUrl, configFromEnv, DEFAULT_BASE_URL, type ModelConfig } from './config.ts';
export { type ChatCompletionMessage, NO_RESULT, rebuild } from './conversation.ts';
export {
  ConfigError,
  DeclaredModelFailed,
  KeyRefused,
  LlmError,
  MalformedStream,
  ProviderError,
  RateLimited,
  RequestFailed,
  Stopped,
  StreamError,
  TooManyRounds,
} from './errors.ts';
export { Assembler, type Completion, type ModelCall } from './stream.ts';
export { type SseEvent, SseDecoder } from './sse.ts';
export { MAX_ATTEMPTS, MAX_BACKOFF, nextWait, offeredTools, providerMessage, requestBody } from './client.ts';

/** How many model calls a turn may make by default. */
export const DEFAULT_MAX_ROUNDS = 8;

/** How a {@link ChatLoop} is built. */
export interface ChatLoopOptions {
  /** At most this many model calls per turn; a model that still asks for tools in the last round ends the turn with {@link TooManyRounds}. */
  maxRounds?: number;
  /** Used instead of reading {@link configFromEnv} from the turn's environment at each run. */
  config?: ModelConfig;
  /** The declared model (`[llm.<alias>]`) to call through the host instead of the default one. */
  alias?: string;
}

/** Where a run's model calls go. */
type Route = { declared: string } | { outbound: ModelConfig };

/**
 * The model loop of a turn. Build it with a system prompt, then {@link run}
 * it on each turn (a new input or a resumed one).
 *
 * A run:
 *
 * 1. (on a turn resumed by an approval decision, the SDK has already run the
 *    suspended step before the handler was called: the approved call ran, a
 *    denied one was reported `denied`);
 * 2. rebuilds the conversation from the journal and calls the model with the
 *    agent's tools;
 * 3. streams its text into one assistant message;
 * 4. if it asked for tools, hands the calls to the host in steps (each step
 *    holds at most one call known to be gated: its code flag or the
 *    operator's `SERVICE_APPROVAL_POLICY`), runs them, and goes back to 2; a
 *    gated call suspends the turn ({@link ToolApprovalRequired} propagates
 *    and ends it cleanly), and the turn that resumes from the decision runs
 *    the loop again;
 * 5. ends when the model answers without tool calls.
 *
 * The model calls go to the declared model `alias` (`[llm.<alias>]`) through
 * the host, else to `main` or the first declared model, else (none declared,
 * or `config` given) over outbound HTTP. A declared model's text is streamed
 * by the host, not written again by the loop; a `closed` host error from it
 * means the host suspended the turn (a budget): the run returns quietly.
 *
 * Errors end the turn with a TURN_ERROR whose message says what happened: an
 * {@link LlmError} (the key refused, rate limited after retries, a provider
 * error, a malformed stream, an answer cut off, more than `maxRounds` model
 * calls, a request that could not be exchanged, a declared model that failed:
 * {@link DeclaredModelFailed}, an unknown alias: {@link ConfigError}).
 */
export class ChatLoop {
  readonly systemPrompt: string;
  readonly maxRounds: number;
  readonly config: ModelConfig | undefined;
  readonly alias: string | undefined;

  constructor(systemPrompt = '', options: ChatLoopOptions = {}) {
    this.systemPrompt = systemPrompt;
    this.maxRounds = Math.max(1, Math.trunc(options.maxRounds ?? DEFAULT_MAX_ROUNDS));
    this.config = options.config;
    this.alias = options.alias;
  }

  /** Where this run's model calls go: an explicit config, else the set alias, else a declared model, else the environment's config. */
  route(env: Readonly<Record<string, string | undefined>>): Route {
    if (this.config) {
      return { outbound: this.config };
    }
    const alias = this.alias ?? defaultAlias();
    return alias !== undefined ? { declared: alias } : { outbound: configFromEnv(env) };
  }

  /** Runs the loop for this turn (see {@link ChatLoop}). */
  async run(turn: Turn): Promise<void> {
    const route = this.route(turn.env);
    // The MCP servers' tools, offered beside the agent's own.
    const tools = [...turn.tools.values(), ...turn.mcpTools()];
    const policy = approvalPolicy(turn.env);
    const codeGated = new Set(tools.filter((t) => t.needsApproval).map((t) => t.name));
    const gated = (name: string): boolean => policy.includes(name) || codeGated.has(name);

    for (let round = 0; round < this.maxRounds; round++) {
      const messages = rebuild(this.systemPrompt, turn.history());
      let completion: Completion;
      if ('declared' in route) {
        try {
          const done = completeDeclared(route.declared, messages, { tools: offeredTools(tools) });
          completion = {
            text: done.text,
            toolCalls: done.toolCalls,
            finishReason: done.finishReason,
            usage: [done.inputTokens, done.outputTokens],
          };
        } catch (error) {
          if (error instanceof HostError && error.kind === 'closed') {
            // The host suspended the turn (a budget): nothing more to do.
            return;
          }
          throw error;
        }
      } else {
        const config = route.outbound;
        const body = requestBody(config, messages, tools);
        completion = await streamReply(turn, config, body);
        if (completion.usage) {
          const [prompt, completionTokens] = completion.usage;
          console.error(
            `agenthost-sdk: model ${config.model} used ${prompt} prompt and ${completionTokens} completion tokens`,
          );
        }
      }
      if (completion.finishReason === LENGTH || completion.finishReason === CONTENT_FILTER) {
        throw new Stopped(completion.finishReason);
      }
      if (completion.toolCalls.length === 0) {
        return;
      }
      const reason = stepReason(completion.text, completion.toolCalls);
      const calls = completion.toolCalls.map(toToolCall);
      for (const step of steps(calls, gated)) {
        // A gated call suspends the turn here: ToolApprovalRequired ends it cleanly.
        await turn.runTools(step, reason);
      }
    }
    throw new TooManyRounds(this.maxRounds);
  }
}

/** One model call, its text streamed into an assistant message (opened at the first text, so a reply with only tool calls writes no message). */
async function streamReply(turn: Turn, config: ModelConfig, body: Record<string, unknown>): Promise<Completion> {
  let message: Message | undefined;
  const completion = await complete(config, body, (text) => {
    message ??= turn.message();
    message.write(text);
  });
  message?.finish();
  return completion;
}

/** The tool names in the operator's `SERVICE_APPROVAL_POLICY` (a JSON array), which the host also gates. */
export function approvalPolicy(env: Readonly<Record<string, string | undefined>>): string[] {
  try {
    const policy = JSON.parse(env.SERVICE_APPROVAL_POLICY ?? '[]') as unknown;
    return Array.isArray(policy) ? policy.filter((p): p is string => typeof p === 'string') : [];
  } catch {
    return [];
  }
}

/** A model's call as the SDK journals it: its own id (`call_<turn>_<n>`), and the arguments as JSON (`{}` when empty; text that is not JSON kept as a string, which the tool reports as invalid). */
export function toToolCall(call: ModelCall): ToolCall {
  const raw = call.arguments.trim();
  if (!raw) {
    return { name: call.name, arguments: {} };
  }
  try {
    return { name: call.name, arguments: JSON.parse(raw) as unknown };
  } catch {
    return { name: call.name, arguments: call.arguments };
  }
}

/** What the human deciding on a gated call is shown: the model's own words before its calls (at most 1000 bytes), or which tools it asked for. */
export function stepReason(text: string, calls: ModelCall[]): string {
  const trimmed = text.trim();
  if (trimmed) {
    const bytes = new TextEncoder().encode(trimmed);
    return bytes.length <= 1000 ? trimmed : new TextDecoder().decode(bytes.slice(0, 1000)).replace(/\uFFFD+$/, '');
  }
  return `the model asked to call ${calls.map((c) => c.name).join(', ')}`;
}

/** Splits one model reply's calls into steps, in order, so that no step holds two calls known to be gated (the host refuses such a step). */
export function steps(calls: ToolCall[], gated: (name: string) => boolean): ToolCall[][] {
  const result: ToolCall[][] = [];
  let stepHasGated = false;
  for (const call of calls) {
    const isGated = gated(call.name);
    if (result.length > 0 && !(isGated && stepHasGated)) {
      result[result.length - 1].push(call);
    } else {
      result.push([call]);
      stepHasGated = false;
    }
    stepHasGated = stepHasGated || isGated;
  }
  return result;
}
