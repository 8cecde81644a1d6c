/**
 * The model's conversation, rebuilt from the session's journal each time the
 * model is called: user inputs, the assistant's messages, its tool calls (one
 * step's TOOL_CALLs become one assistant message with `tool_calls`) and their
 * results (`role: tool`). Nothing else is kept. The messages are the chat
 * completions API's JSON objects.
 *
 * @module
 */

import { type Event, isObject } from '../history.ts';
import * as journal from '../journal.ts';
import { dumps } from '../json.ts';
import { inputText } from '../turn.ts';

/** What the model is told about a call that never got a result (its turn failed, or handed over more gated calls than one step may hold). */
export const NO_RESULT = 'no result: the turn ended before this call ran';

/** One chat completions message. */
export type ChatCompletionMessage = Record<string, unknown> & { role: string };

/** Arguments as the model is shown them: a string is the model's own text (kept as is when it was not JSON), anything else its JSON text. */
function argumentsText(args: unknown): string {
  return typeof args === 'string' ? args : dumps(args ?? null);
}

function resultContent(status: string, output: unknown): string {
  const text = typeof output === 'string' ? output : dumps(output ?? null);
  if (status === 'ok') return text;
  if (status === 'error') return `error: ${text}`;
  if (status === 'denied') return `denied: a human reviewer denied this call, so it did not run (${text})`;
  return `${status}: ${text}`;
}

class Builder {
  readonly messages: ChatCompletionMessage[] = [];
  /** The last message is an assistant message of the current model round: tool calls that follow belong to it. */
  assistantOpen = false;
  /** Calls of the last tool-call message that have no result yet, in order. */
  pending: string[] = [];

  /** Before a message other than a tool result: every call still without a result gets one, so the conversation stays valid. */
  settle(): void {
    for (const id of this.pending) {
      this.messages.push({ role: 'tool', tool_call_id: id, content: NO_RESULT });
    }
    this.pending = [];
  }

  push(message: ChatCompletionMessage): void {
    this.settle();
    this.assistantOpen = message.role === 'assistant';
    this.messages.push(message);
  }

  event(event: Event): void {
    const payload = isObject(event.payload) ? event.payload : {};
    switch (event.eventType) {
      case journal.TURN_STARTED: {
        this.assistantOpen = false;
        const started = payload as Partial<journal.TurnStarted>;
        const value = started.input;
        const reason = started.reason;
        const isInput = isObject(reason) && reason.kind === 'input';
        // A text input has its user message next; other inputs only live here.
        if (isInput && value !== undefined && value !== null && inputText(value) === undefined) {
          this.push({ role: 'user', content: dumps(value) });
        }
        break;
      }
      case journal.MESSAGE_END: {
        const end = payload as Partial<journal.MessageEnd>;
        const text = typeof end.text === 'string' ? end.text : '';
        if (end.role === 'user') {
          this.push({ role: 'user', content: text });
        } else if (end.role === 'assistant' && text) {
          this.push({ role: 'assistant', content: text });
        }
        break;
      }
      case journal.TOOL_CALL: {
        const call = payload as Partial<journal.ToolCall>;
        const { tool_call_id: id, name } = call;
        if (typeof id !== 'string' || typeof name !== 'string') {
          return;
        }
        if (!this.assistantOpen) {
          this.push({ role: 'assistant', content: null });
        }
        const last = this.messages[this.messages.length - 1];
        const calls = (last.tool_calls ??= []) as unknown[];
        calls.push({ id, type: 'function', function: { name, arguments: argumentsText(call.arguments) } });
        this.pending.push(id);
        break;
      }
      case journal.TOOL_RESULT: {
        this.assistantOpen = false;
        const result = payload as Partial<journal.ToolResult>;
        const id = result.tool_call_id;
        // Only a call still waiting (its message is the last non-tool one).
        if (typeof id === 'string' && this.pending.includes(id)) {
          this.pending = this.pending.filter((p) => p !== id);
          const status = typeof result.status === 'string' ? result.status : 'ok';
          this.messages.push({ role: 'tool', tool_call_id: id, content: resultContent(status, result.output) });
        }
        break;
      }
      default:
      // Lifecycle events (approvals, HTTP_REQUEST, ...) and types this SDK does not know say nothing to the model.
    }
  }
}

/** The conversation for the model: `system` (if not empty), then what the journal `events` hold. */
export function rebuild(system: string, events: Iterable<Event>): ChatCompletionMessage[] {
  const builder = new Builder();
  if (system) {
    builder.messages.push({ role: 'system', content: system });
  }
  for (const event of events) {
    builder.event(event);
  }
  builder.settle();
  return builder.messages;
}
