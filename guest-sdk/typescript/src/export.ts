/**
 * The `guest` export behind an agent: `describe` from the {@link Agent},
 * `handle` around its handler (the resumed step first, open messages closed
 * after), and exceptions turned into TURN_ERROR messages.
 *
 * `agenthost deploy` bundles a generated entry module,
 * `export const guest = exportAgent(app, "agent.ts")`, where `app` is the
 * project's `agent.ts`.
 *
 * @module
 */

/// <reference path="./wit/agent.d.ts" />

import type { Description, Turn as WireTurn } from 'agenthost:agent/types@0.1.0';

import { Agent } from './agent.ts';
import { AgentError, ToolApprovalRequired } from './errors.ts';
import * as host from './host.ts';
import { installFetch } from './http.ts';
import { dumps } from './json.ts';
import { resumeStep } from './resume.ts';
import { authorFrame } from './stack.ts';
import { callFromWire } from './tools.ts';
import { type Decision, Turn } from './turn.ts';

/** Frames of a stack kept in a TURN_ERROR message (the innermost). */
export const MAX_FRAMES = 8;

/** The module's default export, or its export named `agent`; a clear error otherwise. */
export function findAgent(module: Record<string, unknown>, file: string): Agent {
  const agent = [module.default, module.agent].find((v) => v instanceof Agent);
  if (!(agent instanceof Agent)) {
    throw new TypeError(
      `${file} must export its agent: \`export default new Agent({ routes: [...] })\` (or \`export const agent = ...\`)`,
    );
  }
  if (agent.routes.length === 0) {
    throw new TypeError(`the agent declares no route: \`new Agent({ routes: ['/chat'] })\` or \`agent.route('/chat')\``);
  }
  if (!agent.registeredHandler) {
    throw new TypeError('the agent has no handler: `agent.handler(async (turn) => { ... })`');
  }
  return agent;
}

/**
 * What a TURN_ERROR says about a throw that left the handler: the SDK's own
 * errors read as their message; any other error as `<Name>: <message>` and
 * the innermost frames of its stack (`function (file:line:column)`, mapped
 * back to the author's source by the map `agenthost deploy` embeds, else in
 * the bundle); anything else thrown as its text.
 */
export function failureMessage(error: unknown): string {
  if (error instanceof AgentError) {
    return error.message;
  }
  if (!(error instanceof Error)) {
    let text: string;
    try {
      text = typeof error === 'string' ? error : dumps(error);
    } catch {
      text = String(error);
    }
    return `uncaught exception: ${text}`;
  }
  const head = error.message ? `${error.name}: ${error.message}` : error.name;
  const frames = (error.stack ?? '')
    .split('\n')
    .map((line) => line.trim())
    // componentize-js's glue (`.../sources/initializer.js`) is not the author's code.
    .filter((line) => line !== '' && !line.includes('/sources/initializer.js'))
    .slice(0, MAX_FRAMES)
    .map((frame) => authorFrame(frame));
  return frames.length === 0 ? head : [head, 'Stack (innermost first):', ...frames.map((f) => `  at ${f}`)].join('\n');
}

function decision(raw: WireTurn['reason']): Decision | undefined {
  if (raw.tag !== 'approval-decision') {
    return undefined;
  }
  const value = raw.val;
  const pending = value.pendingToolCall;
  return {
    approved: value.approved,
    approver: value.approver,
    call: callFromWire(pending.toolCallId, pending.name, pending.arguments),
    step: value.step.map((c) => callFromWire(c.toolCallId, c.name, c.arguments)),
  };
}

/** Secrets arrive as environment variables: `process.env` is this turn's. */
function installEnv(env: Record<string, string>): void {
  const global = globalThis as { process?: { env?: Record<string, string> } };
  if (global.process && typeof global.process === 'object') {
    global.process.env = { ...env };
  } else {
    global.process = { env: { ...env } };
  }
}

/** The result the component returns from `handle`. */
type HandleResult = { tag: 'ok'; val: undefined } | { tag: 'err'; val: string };

/** The `guest` export for the agent that `module` exports (`file` names it in errors). */
export function exportAgent(module: Record<string, unknown>, file = 'agent.ts') {
  const agent = findAgent(module, file);
  // A refused request says why (at build time, so every turn's snapshot has it).
  installFetch();
  return {
    describe(): Description {
      return {
        routes: [...agent.routes],
        tools: [...agent.tools.values()].map((tool) => ({
          name: tool.name,
          description: tool.description,
          parameters: dumps(tool.parameters),
          needsApproval: tool.needsApproval,
        })),
      };
    },

    async handle(raw: WireTurn): Promise<HandleResult> {
      let turn: Turn | undefined;
      try {
        const env = host.environment();
        installEnv(env);
        turn = new Turn(
          {
            sessionId: raw.sessionId,
            number: raw.turn,
            route: raw.route,
            inputJson: raw.input,
            decision: decision(raw.reason),
            env,
          },
          agent.tools,
        );
        if (turn.decision) {
          // The suspended step is answered before the handler sees the turn.
          turn.resumed = await resumeStep(turn, agent.tools);
        }
        await agent.registeredHandler?.(turn);
        turn.finishMessages();
        return { tag: 'ok', val: undefined };
      } catch (error) {
        turn?.finishMessages();
        if (error instanceof ToolApprovalRequired || turn?.suspended) {
          // The host has suspended the turn: not an error, whatever came after.
          return { tag: 'ok', val: undefined };
        }
        return { tag: 'err', val: failureMessage(error) };
      }
    },
  };
}
