// Unit tests of the model loop over declared models (`[llm.<alias>]`): the
// alias it picks, the text it leaves to the host, the calls it hands over,
// and a `closed` host error that ends the run quietly. The host's llm
// imports are answered through `globalThis.agenthostTestLlm` (run.mjs).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { HostError } from '../src/errors.ts';
import {
  ChatLoop,
  ConfigError,
  completeDeclared,
  configFromEnv,
  DeclaredModelFailed,
  declaredModels,
} from '../src/llm/index.ts';
import type { ToolCall } from '../src/tools.ts';
import type { Turn } from '../src/turn.ts';

interface Asked {
  alias: string;
  messages: unknown;
  tools: { function: { name: string } }[];
  parameters: unknown;
}

/** Answers the llm imports with `replies` in order (a thrown `{payload}` is a WIT error). */
function fakeHost(aliases: string[], replies: unknown[]): Asked[] {
  const asked: Asked[] = [];
  (globalThis as Record<string, unknown>).agenthostTestLlm = {
    aliases: () => aliases,
    complete: (request: { alias: string; messages: string; tools: string; parameters: string }) => {
      asked.push({
        alias: request.alias,
        messages: JSON.parse(request.messages),
        tools: JSON.parse(request.tools),
        parameters: JSON.parse(request.parameters),
      });
      const reply = replies.shift();
      if (reply && typeof reply === 'object' && 'payload' in reply) {
        throw reply;
      }
      return reply;
    },
  };
  return asked;
}

function done(text: string, calls: [string, string, string][] = [], finish = 'stop'): unknown {
  return {
    messageId: text ? 'msg_1' : undefined,
    text,
    toolCalls: calls.map(([id, name, args]) => ({ id, name, arguments: args })),
    finishReason: finish,
    servedBy: 'main',
    inputTokens: 10n,
    outputTokens: 3n,
  };
}

/** A turn that records its steps and refuses to write a message. */
function fakeTurn(): { turn: Turn; steps: [ToolCall[], string | undefined][] } {
  const steps: [ToolCall[], string | undefined][] = [];
  const tools = new Map([['echo', { name: 'echo', description: 'Returns its arguments.', parameters: { type: 'object' } }]]);
  const turn = {
    env: {},
    tools,
    mcpTools: () => [],
    history: () => [],
    message: () => {
      throw new Error("the host streams a declared model's text: the loop must not write it");
    },
    runTools: async (calls: ToolCall[], reason?: string) => {
      steps.push([calls, reason]);
      return [];
    },
  };
  return { turn: turn as unknown as Turn, steps };
}

test('the loop calls main, hands over the calls and writes no text', async () => {
  const asked = fakeHost(['backup', 'main'], [
    done('Let me look.', [['p1', 'echo', '{"x":1}']], 'tool_calls'),
    done('Hello'),
    done('Direct'),
  ]);
  const { turn, steps } = fakeTurn();
  await new ChatLoop('Be brief.').run(turn);
  assert.deepEqual(
    asked.map((a) => a.alias),
    ['main', 'main'],
  );
  assert.deepEqual(asked[0].messages, [{ role: 'system', content: 'Be brief.' }]);
  assert.equal(asked[0].tools[0].function.name, 'echo');
  assert.deepEqual(asked[0].parameters, {});
  assert.deepEqual(steps, [[[{ name: 'echo', arguments: { x: 1 } }], 'Let me look.']]);
  assert.deepEqual(declaredModels(), ['backup', 'main']);
  const direct = completeDeclared('main', [{ role: 'user', content: 'hi' }], { parameters: { temperature: 0 } });
  assert.deepEqual(
    [direct.text, direct.servedBy, direct.inputTokens, direct.outputTokens, direct.messageId],
    ['Direct', 'main', 10, 3, 'msg_1'],
  );
  assert.deepEqual(asked[2].parameters, { temperature: 0 });
  assert.deepEqual(asked[2].tools, []);
});

test('an alias set is used, and without main the first declared', async () => {
  let asked = fakeHost(['backup', 'main'], [done('a')]);
  await new ChatLoop('', { alias: 'backup' }).run(fakeTurn().turn);
  assert.equal(asked[0].alias, 'backup');
  asked = fakeHost(['zeta', 'alpha'], [done('b')]);
  await new ChatLoop().run(fakeTurn().turn);
  assert.equal(asked[0].alias, 'zeta');
});

test('a closed host error ends the run quietly; the other errors end the turn', async () => {
  fakeHost(['main'], [{ payload: { tag: 'host', val: { tag: 'closed', val: 'budget reached' } } }]);
  const { turn, steps } = fakeTurn();
  await new ChatLoop().run(turn);
  assert.deepEqual(steps, []);
  fakeHost(['main'], [{ payload: { tag: 'host', val: { tag: 'limit', val: 'too many events' } } }]);
  await assert.rejects(new ChatLoop().run(fakeTurn().turn), (e) => e instanceof HostError && e.kind === 'limit');
  fakeHost(['main'], [{ payload: { tag: 'failed', val: 'HTTP 503: overloaded' } }]);
  await assert.rejects(
    new ChatLoop().run(fakeTurn().turn),
    (e) => e instanceof DeclaredModelFailed && e.message === 'the declared model failed: HTTP 503: overloaded',
  );
  fakeHost(['main'], [{ payload: { tag: 'unknown-alias', val: 'no [llm.nope]' } }]);
  await assert.rejects(new ChatLoop('', { alias: 'nope' }).run(fakeTurn().turn), (e) => e instanceof ConfigError);
});

test('with a config or nothing declared the loop goes outbound', () => {
  fakeHost([], []);
  const config = configFromEnv({ OPENAI_MODEL: 'm' });
  assert.deepEqual(new ChatLoop('', { config }).route({}), { outbound: config });
  assert.throws(() => new ChatLoop().route({}), ConfigError); // OPENAI_MODEL is not set
  assert.deepEqual(new ChatLoop().route({ OPENAI_MODEL: 'm' }), { outbound: configFromEnv({ OPENAI_MODEL: 'm' }) });
});
