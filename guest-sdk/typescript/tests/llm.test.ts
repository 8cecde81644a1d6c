// Unit tests of the model loop's parts: SSE decoding, assembling a streamed
// completion, the conversation rebuilt from the journal, steps, retries,
// the provider's words, configuration.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import type { Event } from '../src/history.ts';
import {
  Assembler,
  approvalPolicy,
  ConfigError,
  configFromEnv,
  MalformedStream,
  NO_RESULT,
  nextWait,
  providerMessage,
  rebuild,
  SseDecoder,
  stepReason,
  steps,
  StreamError,
  toToolCall,
} from '../src/llm/index.ts';

test('SSE: any split, any line end, comments and multi-line data', () => {
  const text = ': hello\r\ndata: {"a":1}\r\n\r\nevent: x\ndata: one\ndata: two\nid: 7\n\n\rdata: [DONE]\r\r';
  for (let size = 1; size <= text.length; size++) {
    const decoder = new SseDecoder();
    const events = [];
    for (let i = 0; i < text.length; i += size) {
      events.push(...decoder.feed(text.slice(i, i + size)));
    }
    assert.deepEqual(
      events.map((e) => [e.event, e.data, e.id]),
      [
        [undefined, '{"a":1}', undefined],
        ['x', 'one\ntwo', '7'],
        [undefined, '[DONE]', undefined],
      ],
      `chunks of ${size}`,
    );
  }
});

const chunk = (delta: unknown, finish: string | null = null) =>
  JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] });

test('a streamed completion: text, parallel calls from fragments, finish reason, usage', () => {
  const a = new Assembler();
  assert.equal(a.feed(chunk({ role: 'assistant', content: 'Let ' })), 'Let ');
  assert.equal(a.feed(chunk({ content: 'me look.' })), 'me look.');
  a.feed(chunk({ tool_calls: [{ index: 0, id: 'c0', type: 'function', function: { name: 'lookup', arguments: '{"id"' } }] }));
  a.feed(chunk({ tool_calls: [{ index: 1, id: 'c1', type: 'function', function: { name: 'lookup', arguments: '' } }] }));
  a.feed(chunk({ tool_calls: [{ index: 0, function: { arguments: ':1}' } }] }));
  a.feed(chunk({ tool_calls: [{ index: 1, function: { arguments: '{"id":2}' } }] }));
  a.feed(chunk({}, 'tool_calls'));
  a.feed(JSON.stringify({ choices: [], usage: { prompt_tokens: 20, completion_tokens: 7 } }));
  a.feed('[DONE]');
  const done = a.finish();
  assert.equal(done.text, 'Let me look.');
  assert.equal(done.finishReason, 'tool_calls');
  assert.deepEqual(done.usage, [20, 7]);
  assert.deepEqual(
    done.toolCalls.map((c) => [c.id, c.name, c.arguments]),
    [
      ['c0', 'lookup', '{"id":1}'],
      ['c1', 'lookup', '{"id":2}'],
    ],
  );
});

test('finish reasons: function_call is tool_calls; [DONE] alone goes by what arrived; a cut stream is malformed', () => {
  const old = new Assembler();
  old.feed(chunk({ function_call: { name: 'f', arguments: '{}' } }, 'function_call'));
  assert.equal(old.finish().finishReason, 'tool_calls');
  for (const reason of ['stop', 'length', 'content_filter', 'something_new']) {
    const a = new Assembler();
    a.feed(chunk({ content: 'x' }, reason));
    assert.equal(a.finish().finishReason, reason);
  }
  const bare = new Assembler();
  bare.feed(chunk({ content: 'x' }));
  bare.feed('[DONE]');
  assert.equal(bare.finish().finishReason, 'stop');
  const cut = new Assembler();
  cut.feed(chunk({ content: 'x' }));
  assert.throws(() => cut.finish(), MalformedStream);
  assert.throws(() => new Assembler().finish(), /no `data:` event arrived/);
  assert.throws(() => new Assembler().feed('{"error":{"message":"overloaded"}}'), StreamError);
  assert.throws(() => new Assembler().feed('nope'), /chunk 1 is not JSON/);
  const badName = new Assembler();
  badName.feed(chunk({ tool_calls: [{ index: 0, function: { name: 'rm -rf', arguments: '' } }] }, 'tool_calls'));
  assert.throws(() => badName.finish(), /not a tool name/);
});

const ev = (eventType: string, payload: unknown, seq = 0): Event => ({ seq: BigInt(seq), eventType, payload });

test('the conversation is rebuilt from the journal: inputs, messages, steps and results', () => {
  const events = [
    ev('TURN_STARTED', { reason: { kind: 'input' }, input: 'where is A1?' }),
    ev('MESSAGE_END', { role: 'user', text: 'where is A1?' }),
    ev('MESSAGE_END', { role: 'assistant', text: 'Let me look.' }),
    ev('TOOL_CALL', { tool_call_id: 'call_1_1', name: 'lookup', arguments: { id: 'A1' } }),
    ev('TOOL_CALL', { tool_call_id: 'call_1_2', name: 'refund', arguments: 'not json' }),
    ev('TOOL_RESULT', { tool_call_id: 'call_1_1', status: 'error', output: 'no order A1' }),
    ev('TURN_ERROR', { kind: 'agent_error' }),
    ev('TURN_STARTED', { reason: { kind: 'input' }, input: { order: 7 } }),
    ev('TOOL_RESULT', { tool_call_id: 'call_1_2', status: 'denied', output: 'denied by bob' }),
  ];
  assert.deepEqual(rebuild('Be brief.', events), [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'where is A1?' },
    {
      role: 'assistant',
      content: 'Let me look.',
      tool_calls: [
        { id: 'call_1_1', type: 'function', function: { name: 'lookup', arguments: '{"id":"A1"}' } },
        { id: 'call_1_2', type: 'function', function: { name: 'refund', arguments: 'not json' } },
      ],
    },
    { role: 'tool', tool_call_id: 'call_1_1', content: 'error: no order A1' },
    { role: 'tool', tool_call_id: 'call_1_2', content: NO_RESULT },
    { role: 'user', content: '{"order":7}' },
  ]);
});

test('steps hold at most one gated call; the reason is the model text or the tools named', () => {
  const call = (name: string) => ({ name, arguments: {} });
  const gated = (name: string) => name.startsWith('g');
  const split = steps([call('a'), call('g1'), call('b'), call('g2'), call('g3')], gated);
  assert.deepEqual(split.map((s) => s.map((c) => c.name)), [['a', 'g1', 'b'], ['g2'], ['g3']]);
  assert.equal(stepReason('  I will refund.  ', []), 'I will refund.');
  assert.equal(stepReason('', [{ id: undefined, name: 'a', arguments: '' }, { id: undefined, name: 'b', arguments: '' }]), 'the model asked to call a, b');
  assert.equal(new TextEncoder().encode(stepReason('é'.repeat(600), [])).length, 1000);
  assert.deepEqual(toToolCall({ id: 'x', name: 'f', arguments: ' ' }), { name: 'f', arguments: {} });
  assert.deepEqual(toToolCall({ id: 'x', name: 'f', arguments: '{oops' }), { name: 'f', arguments: '{oops' });
  assert.deepEqual(approvalPolicy({ SERVICE_APPROVAL_POLICY: '["rm", 3]' }), ['rm']);
  assert.deepEqual(approvalPolicy({ SERVICE_APPROVAL_POLICY: 'nope' }), []);
});

test('429: Retry-After seconds, else 1, 2, 4, 8; at most 5 attempts and 30 s', () => {
  assert.deepEqual(nextWait(1, '3', 0), [3, '']);
  assert.deepEqual(nextWait(1, null, 0), [1, '']);
  assert.deepEqual(nextWait(3, 'soon', 3), [4, '']);
  assert.deepEqual(nextWait(5, null, 0), [undefined, 'gave up after 5 attempts']);
  assert.deepEqual(nextWait(2, '29', 2), [undefined, 'waiting 29 s more would exceed the 30 s retry budget']);
});

test("the provider's words, and the configuration from the environment", () => {
  assert.equal(providerMessage('{"error":{"message":"Rate limit reached"}}'), 'Rate limit reached');
  assert.equal(providerMessage('{"error":"bad"}'), 'bad');
  assert.equal(providerMessage('  '), '(no message)');
  assert.equal(providerMessage('x'.repeat(600)), `${'x'.repeat(500)}…`);
  assert.deepEqual(configFromEnv({ OPENAI_MODEL: ' gpt ', OPENAI_API_KEY: '' }), {
    model: 'gpt',
    baseUrl: 'https://api.openai.com/v1',
    apiKey: undefined,
  });
  assert.throws(() => configFromEnv({}), ConfigError);
  assert.throws(() => configFromEnv({}), /OPENAI_MODEL is not set/);
});
