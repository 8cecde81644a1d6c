/**
 * Assembling a streamed chat completion: {@link Assembler} takes the `data:`
 * of each Server-Sent Event and returns the text deltas as they come, then
 * the whole {@link Completion} (text, tool calls put together from their
 * fragments, finish reason, usage).
 *
 * @module
 */

import { isObject } from '../history.ts';
import { MalformedStream, parseFinishReason, STOP, StreamError, TOOL_CALLS } from './errors.ts';

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** A tool call the model asked for. */
export interface ModelCall {
  /** The model's id for the call, if it sent one (the SDK journals its own). */
  id: string | undefined;
  name: string;
  /** The arguments as the model wrote them (JSON text, unchecked). */
  arguments: string;
}

/** One model response, put together. */
export interface Completion {
  text: string;
  toolCalls: ModelCall[];
  finishReason: string;
  /** `[promptTokens, completionTokens]` from the usage chunk, if any. */
  usage: [number, number] | undefined;
}

function excerpt(data: string): string {
  return data.length > 200 ? `${data.slice(0, 200)}…` : data;
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : 0;
}

function index(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}

interface Partial {
  id: string | undefined;
  name: string;
  arguments: string;
}

/** Puts a streamed chat completion together, one `data:` payload at a time. */
export class Assembler {
  text = '';
  readonly calls = new Map<number, Partial>();
  finishReason: string | undefined;
  usage: [number, number] | undefined;
  done = false;
  chunks = 0;

  /** Feeds one event's data. Returns the text the model added (often empty). */
  feed(data: string): string {
    if (this.done) {
      return ''; // nothing is expected after [DONE]
    }
    if (data.trim() === '[DONE]') {
      this.done = true;
      return '';
    }
    this.chunks += 1;
    let chunk: unknown;
    try {
      chunk = JSON.parse(data);
    } catch (error) {
      throw new MalformedStream(`chunk ${this.chunks} is not JSON (${(error as Error).message}): ${excerpt(data)}`);
    }
    if (!isObject(chunk)) {
      throw new MalformedStream(`chunk ${this.chunks} is not a JSON object: ${excerpt(data)}`);
    }
    const error = chunk.error;
    if (error !== undefined && error !== null) {
      const message = isObject(error) && typeof error.message === 'string' ? error.message : JSON.stringify(error);
      throw new StreamError(message);
    }
    if (isObject(chunk.usage)) {
      this.usage = [count(chunk.usage.prompt_tokens), count(chunk.usage.completion_tokens)];
    }
    const choices = chunk.choices;
    if (choices === undefined || choices === null) {
      return '';
    }
    if (!Array.isArray(choices)) {
      throw new MalformedStream(`\`choices\` of chunk ${this.chunks} is not an array: ${excerpt(data)}`);
    }
    // One completion was asked for (n = 1): its choice has index 0.
    const choice = choices.find((c) => isObject(c) && (index(c.index) ?? 0) === 0) as
      | Record<string, unknown>
      | undefined;
    if (!choice) {
      return '';
    }
    let added = '';
    const delta = isObject(choice.delta) ? choice.delta : {};
    for (const name of ['content', 'refusal']) {
      const piece = delta[name];
      if (typeof piece === 'string') {
        added += piece;
      }
    }
    if (Array.isArray(delta.tool_calls)) {
      for (const fragment of delta.tool_calls) {
        this.#fragment(fragment);
      }
    } else if (isObject(delta.function_call)) {
      // The pre-tools API: one call, in `function_call`.
      this.#fragment({ index: 0, function: delta.function_call });
    }
    if (typeof choice.finish_reason === 'string') {
      this.finishReason = choice.finish_reason;
    }
    this.text += added;
    return added;
  }

  /** One element of `delta.tool_calls`: the first fragment of a call brings its id and name, the next ones pieces of its arguments. */
  #fragment(fragment: unknown): void {
    if (!isObject(fragment)) {
      throw new MalformedStream(
        `a tool call fragment in chunk ${this.chunks} is not an object: ${JSON.stringify(fragment)}`,
      );
    }
    const id = typeof fragment.id === 'string' && fragment.id ? fragment.id : undefined;
    let at = index(fragment.index);
    if (at === undefined) {
      // Some servers leave `index` out: a new id starts a new call.
      const last = this.calls.size > 0 ? Math.max(...this.calls.keys()) : undefined;
      if (last === undefined) {
        at = 0;
      } else if (id === undefined || this.calls.get(last)?.id === id) {
        at = last;
      } else {
        at = last + 1;
      }
    }
    let partial = this.calls.get(at);
    if (!partial) {
      partial = { id: undefined, name: '', arguments: '' };
      this.calls.set(at, partial);
    }
    if (id !== undefined && partial.id === undefined) {
      partial.id = id;
    }
    const fn = fragment.function;
    if (isObject(fn)) {
      if (typeof fn.name === 'string' && !partial.name) {
        partial.name = fn.name;
      }
      if (typeof fn.arguments === 'string') {
        partial.arguments += fn.arguments;
      }
    }
  }

  /** The completion, once the stream has ended. */
  finish(): Completion {
    if (this.chunks === 0 && !this.done) {
      throw new MalformedStream(
        'no `data:` event arrived (an OpenAI-compatible stream sends `data: {"choices":[...]}` events, then `data: [DONE]`)',
      );
    }
    let finishReason: string;
    if (this.finishReason !== undefined) {
      finishReason = parseFinishReason(this.finishReason);
    } else if (this.done) {
      // [DONE] without a finish_reason: go by what arrived.
      finishReason = this.calls.size > 0 ? TOOL_CALLS : STOP;
    } else {
      throw new MalformedStream('the stream ended before the model finished (no finish_reason, no [DONE])');
    }
    const toolCalls: ModelCall[] = [];
    for (const at of [...this.calls.keys()].sort((a, b) => a - b)) {
      const call = this.calls.get(at) as Partial;
      if (!call.name) {
        throw new MalformedStream(`tool call ${at} has no function name`);
      }
      if (!TOOL_NAME.test(call.name)) {
        throw new MalformedStream(
          `tool call ${at} names \`${excerpt(call.name)}\`, which is not a tool name (1 to 64 letters, digits, _ or -)`,
        );
      }
      toolCalls.push({ id: call.id, name: call.name, arguments: call.arguments });
    }
    return { text: this.text, toolCalls, finishReason, usage: this.usage };
  }
}
