/**
 * Resuming a suspended step. On a turn whose reason is an approval decision,
 * the SDK runs the step the human decided on *before* the agent's handler
 * sees the turn (so no agent can forget to answer it): every ungated call
 * runs, the gated call runs if approved (with the human's edited arguments,
 * if any), is reported `ok` with the result a human gave in its place (it
 * does not run), or is reported `denied` with the output
 * `"denied by <approver>"` (`"denied by <approver>: <message>"` with a
 * message). The decision's message, given result and original arguments are
 * read from its event in the journal first. The results are
 * {@link Turn.resumed}.
 *
 * @module
 */

import { type Event, isObject } from './history.ts';
import * as journal from './journal.ts';
import { callMcp } from './mcp.ts';
import { invoke, report, type Tool, type ToolCall, type ToolResult } from './tools.ts';
import type { Decision, Turn } from './turn.ts';

/** What to do with one call of the suspended step. */
export type Action = ['run' | 'deny' | 'answer', ToolCall & { id: string }];

/**
 * Completes `decision` from its event (the last TOOL_APPROVAL_GRANTED or
 * _DENIED of the pending call): its message, a given result and the original
 * arguments. The WIT record says `approved: false` when a result was given
 * (so an SDK from before results runs nothing); the event says it was approved.
 */
export function complete(decision: Decision, events: Iterable<Event>): void {
  let found: Event | undefined;
  for (const event of events) {
    const decided = event.eventType === journal.TOOL_APPROVAL_GRANTED || event.eventType === journal.TOOL_APPROVAL_DENIED;
    if (decided && isObject(event.payload) && event.payload.tool_call_id === decision.call.id) {
      found = event;
    }
  }
  if (!found || !isObject(found.payload)) {
    return;
  }
  const { message, result, original_arguments: original } = found.payload;
  if (typeof message === 'string') decision.message = message;
  if (result !== undefined && result !== null) decision.result = result;
  if (original !== undefined && original !== null) decision.originalArguments = original;
  if (found.eventType === journal.TOOL_APPROVAL_GRANTED) decision.approved = true;
}

function action(decision: Decision, call: ToolCall & { id: string }): Action[0] {
  if (call.id !== decision.call.id) return 'run';
  if (decision.approved && decision.result !== undefined) return 'answer';
  return decision.approved ? 'run' : 'deny';
}

/**
 * The suspended step's calls in their original order, each with what to do:
 * every call runs, except the pending one when it was denied. A step that
 * does not list the pending call gets it at the end, so it is answered all
 * the same.
 */
export function plan(decision: Decision): Action[] {
  const step = [...decision.step];
  if (!step.some((call) => call.id === decision.call.id)) {
    step.push(decision.call);
  }
  return step.map((call) => [action(decision, call), call]);
}

/**
 * Runs the suspended step of a resumed turn, reporting each result to the
 * host as it comes (so a later tool sees the earlier results in the history).
 * Returns every result in step order. The SDK calls it before the handler;
 * a second call runs nothing and returns the same results (the step runs
 * exactly once).
 */
export async function resumeStep(turn: Turn, tools: Map<string, Tool>): Promise<ToolResult[]> {
  const decision = turn.decision;
  if (!decision) {
    return [];
  }
  if (turn.resumed) {
    return turn.resumed;
  }
  complete(decision, turn.history());
  const denial = `denied by ${decision.approver}` + (decision.message === undefined ? '' : `: ${decision.message}`);
  const results: ToolResult[] = [];
  for (const [todo, call] of plan(decision)) {
    if (!tools.has(call.name)) {
      // Not the agent's own: the host runs it (or answers it as the human decided) and journals its result.
      results.push(callMcp(call.id, call.name));
      continue;
    }
    const result: ToolResult =
      todo === 'run'
        ? await invoke(turn, tools, call.id, call)
        : todo === 'answer'
          ? { id: call.id, name: call.name, status: 'ok', output: decision.result }
          : { id: call.id, name: call.name, status: 'denied', output: denial };
    report(result);
    results.push(result);
  }
  return results;
}
