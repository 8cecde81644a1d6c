/**
 * Resuming a suspended step. On a turn whose reason is an approval decision,
 * the SDK runs the step the human decided on *before* the agent's handler
 * sees the turn (so no agent can forget to answer it): every ungated call
 * runs, the gated call runs if approved or is reported `denied` with the
 * output `"denied by <approver>"`. The results are {@link Turn.resumed}.
 *
 * @module
 */

import { invoke, report, type Tool, type ToolCall, type ToolResult } from './tools.ts';
import type { Decision, Turn } from './turn.ts';

/** What to do with one call of the suspended step. */
export type Action = ['run' | 'deny', ToolCall & { id: string }];

/**
 * The suspended step's calls in their original order, each with what to do:
 * every call runs, except the pending one when it was denied. A step that
 * does not list the pending call gets it at the end, so it is answered all
 * the same.
 */
export function plan(decision: Decision): Action[] {
  const pending = decision.call.id;
  const step = [...decision.step];
  if (!step.some((call) => call.id === pending)) {
    step.push(decision.call);
  }
  return step.map((call) => [call.id === pending && !decision.approved ? 'deny' : 'run', call]);
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
  const results: ToolResult[] = [];
  for (const [action, call] of plan(decision)) {
    const result: ToolResult =
      action === 'run'
        ? await invoke(turn, tools, call.id, call)
        : { id: call.id, name: call.name, status: 'denied', output: `denied by ${decision.approver}` };
    report(result);
    results.push(result);
  }
  return results;
}
