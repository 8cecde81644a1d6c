/**
 * The host imports (`agenthost:agent/host` and `agenthost:agent/llm`), the
 * only module that calls them: each refusal (a `ComponentError` whose `payload` is the WIT
 * `host-error`) becomes a {@link HostError}.
 *
 * The imports exist only inside a component built by `agenthost deploy`;
 * the SDK's unit tests replace this module.
 *
 * @module
 */

/// <reference path="./wit/agent.d.ts" />

import * as host from 'agenthost:agent/host@0.1.0';
import * as llm from 'agenthost:agent/llm@0.1.0';
import type { HostError as WireHostError, ToolStatus } from 'agenthost:agent/types@0.1.0';
import { getEnvironment } from 'wasi:cli/environment@0.2.12';

import { HostError, type HostErrorKind } from './errors.ts';

const KINDS: Record<WireHostError['tag'], HostErrorKind> = {
  'invalid-order': 'invalid_order',
  limit: 'limit',
  closed: 'closed',
  unavailable: 'unavailable',
};

function hostError(error: unknown): unknown {
  const payload = (error as { payload?: unknown } | null)?.payload as WireHostError | undefined;
  if (payload && typeof payload === 'object' && payload.tag in KINDS) {
    return new HostError(KINDS[payload.tag], String(payload.val));
  }
  return error;
}

function call<T>(effect: () => T): T {
  try {
    return effect();
  } catch (error) {
    throw hostError(error);
  }
}

/** A tool call as it crosses the boundary: `[id, name, arguments JSON]`. */
export type WireCall = [id: string, name: string, argumentsJson: string];

export function messageStart(): string {
  return call(() => host.messageStart());
}

export function messageDelta(messageId: string, text: string): void {
  call(() => host.messageDelta(messageId, text));
}

export function messageEnd(messageId: string): void {
  call(() => host.messageEnd(messageId));
}

/** Hands over a step. Returns `undefined` to run it, or the call that suspends the turn. */
export function toolCalls(calls: WireCall[], reason: string | undefined): WireCall | undefined {
  const wire = calls.map(([toolCallId, name, args]) => ({ toolCallId, name, arguments: args }));
  const step = call(() => host.toolCalls(wire, reason));
  if (step.tag === 'suspend') {
    return [step.val.toolCallId, step.val.name, step.val.arguments];
  }
  return undefined;
}

export function toolResult(toolCallId: string, output: string, status: ToolStatus): void {
  call(() => host.toolResult(toolCallId, output, status));
}

/** One page: `[[seq, eventType, payload JSON], ...]` and the `after` of the next page. */
export function readHistory(
  after: bigint | undefined,
  limit: number,
): { events: [bigint, string, string][]; next: bigint | undefined } {
  const page = call(() => host.readHistory(after, limit));
  return {
    events: page.events.map((e) => [e.seq, e.eventType, e.payload]),
    next: page.next,
  };
}

export function endSession(): void {
  call(() => host.endSession());
}

// timers (docs/schedules.md)

/** Schedules `inputJson` as a later turn (`afterMs` or `at`): the schedule's id. */
export function schedule(afterMs: bigint | undefined, at: string | undefined, inputJson: string): string {
  return call(() => host.schedule(afterMs, at, inputJson));
}

/** Cancels a pending schedule of the session: whether one was pending. */
export function cancelSchedule(id: string): boolean {
  return call(() => host.cancelSchedule(id));
}

/** The turn's environment variables (the deployment's secrets among them). */
export function environment(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of getEnvironment()) {
    env[name] = value;
  }
  return env;
}

// mcp

/** The MCP servers' tools: `[name, description, parameters JSON, needsApproval]`. */
export function mcpTools(): [string, string, string, boolean][] {
  return call(() => host.mcpTools()).map((t) => [t.name, t.description, t.parameters, t.needsApproval]);
}

/** Runs a handed-over MCP call on the host: `[output JSON, status]`. */
export function mcpCall(toolCallId: string): [string, ToolStatus] {
  const result = call(() => host.mcpCall(toolCallId));
  return [result.output, result.status];
}

// llm (docs/llm.md)

/** `complete` failed without a host error: the WIT `llm-error`'s case and its words. */
export class LlmRefused extends Error {
  constructor(
    readonly kind: 'unknown-alias' | 'invalid-request' | 'failed',
    readonly detail: string,
  ) {
    super(`${kind}: ${detail}`);
  }
}

/** The aliases of the manifest's `[llm.<alias>]` models, in name order. */
export function llmAliases(): string[] {
  return call(() => llm.aliases());
}

/** A completion as it crosses the boundary. */
export interface WireCompletion {
  messageId: string | undefined;
  text: string;
  toolCalls: WireCall[];
  finishReason: string;
  servedBy: string;
  inputTokens: number;
  outputTokens: number;
}

/**
 * One completion through the host. Throws a {@link HostError} for the
 * `host` case, an {@link LlmRefused} for the others.
 */
export function llmComplete(alias: string, messages: string, tools: string, parameters: string): WireCompletion {
  let done: llm.Completion;
  try {
    done = llm.complete({ alias, messages, tools, parameters });
  } catch (error) {
    const payload = (error as { payload?: unknown } | null)?.payload as llm.LlmError | undefined;
    if (payload && typeof payload === 'object' && 'tag' in payload) {
      if (payload.tag === 'host') {
        throw hostError({ payload: payload.val });
      }
      throw new LlmRefused(payload.tag, String(payload.val));
    }
    throw error;
  }
  return {
    messageId: done.messageId,
    text: done.text,
    toolCalls: done.toolCalls.map((c) => [c.id, c.name, c.arguments]),
    finishReason: done.finishReason,
    servedBy: done.servedBy,
    inputTokens: Number(done.inputTokens),
    outputTokens: Number(done.outputTokens),
  };
}
