// Unit tests of the SDK's core: JSON text, schemas, history paging, the
// resumed step's plan, failure messages.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { AgentError, HostError } from '../src/errors.ts';
import { failureMessage } from '../src/export.ts';
import { History, type Page } from '../src/history.ts';
import { dumps } from '../src/json.ts';
import { plan } from '../src/resume.ts';
import { check, withDefaults } from '../src/schema.ts';
import { callFromWire } from '../src/tools.ts';
import { inputText } from '../src/turn.ts';

test('JSON text is compact with sorted keys, and refuses what JSON cannot hold', () => {
  assert.equal(dumps({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: 'é' } }), '{"a":{"c":"é","d":[1,{"y":2,"z":1}]},"b":1}');
  assert.equal(dumps({ a: undefined, b: null }), '{"b":null}');
  assert.throws(() => dumps(Number.NaN), /not a JSON number/);
  assert.throws(() => dumps(undefined), /not JSON/);
  assert.throws(() => dumps({ n: 1n }), /bigint/);
});

test('arguments are checked against the schema with Rust-like wording', () => {
  const schema = {
    type: 'object',
    properties: {
      name: { type: 'string', minLength: 1 },
      count: { type: 'integer', minimum: 0 },
      tags: { type: 'array', items: { type: 'string' } },
      mode: { enum: ['fast', 'slow'] },
    },
    required: ['name'],
    additionalProperties: false,
  };
  assert.equal(check(schema, { name: 'a', count: 2, tags: ['x'], mode: 'fast' }), undefined);
  assert.equal(check(schema, {}), 'missing field `name`');
  assert.equal(check(schema, { name: 'a', extra: 1 }), 'unknown field `extra`');
  assert.equal(check(schema, { name: 1 }), '`name`: invalid type: expected a string, found an integer');
  assert.equal(check(schema, { name: 'a', count: 1.5 }), '`count`: invalid type: expected an integer, found a number');
  assert.equal(check(schema, { name: 'a', count: -1 }), '`count`: -1 is less than 0');
  assert.equal(check(schema, { name: 'a', tags: ['x', 2] }), '`tags[1]`: invalid type: expected a string, found an integer');
  assert.equal(check(schema, { name: 'a', mode: 'odd' }), '`mode`: "odd" is not one of "fast", "slow"');
  assert.equal(check(schema, 'text'), 'invalid type: expected an object, found a string');
  assert.equal(check({ anyOf: [{ type: 'string' }, { type: 'null' }] }, null), undefined);
  assert.deepEqual(withDefaults({ properties: { text: { default: '' } } }, {}), { text: '' });
  assert.deepEqual(withDefaults({ properties: { text: { default: '' } } }, { text: 'x' }), { text: 'x' });
});

test('history pages until the last page, and stops on a host that makes no progress', () => {
  const event = (seq: number) => ({ seq: BigInt(seq), eventType: 'MESSAGE_END', payload: { role: 'user', text: `m${seq}` } });
  const asked: (bigint | undefined)[] = [];
  const pages: Page[] = [
    { events: [event(1), event(2)], next: 2n },
    { events: [event(3)], next: undefined },
  ];
  const history = new History((after) => {
    asked.push(after);
    return pages.shift() ?? { events: [], next: undefined };
  });
  assert.deepEqual(history.messages().map((m) => m.text), ['m1', 'm2', 'm3']);
  assert.deepEqual(asked, [undefined, 2n]);

  let reads = 0;
  const stuck = new History(() => {
    reads += 1;
    return { events: [event(1)], next: 0n };
  });
  assert.equal([...stuck].length, 2);
  assert.equal(reads, 2);
});

test('the resumed step runs in order; a denied pending call is answered denied; a missing one is added', () => {
  const a = callFromWire('call_1_1', 'add', '{"n":1}');
  const d = callFromWire('call_1_2', 'delete', 'not json');
  assert.equal(d.arguments, 'not json');
  const approved = { approved: true, approver: 'alice', call: d, step: [a, d] };
  assert.deepEqual(plan(approved).map(([action, call]) => [action, call.id]), [['run', 'call_1_1'], ['run', 'call_1_2']]);
  const denied = { ...approved, approved: false };
  assert.deepEqual(plan(denied).map(([action, call]) => [action, call.id]), [['run', 'call_1_1'], ['deny', 'call_1_2']]);
  const missing = { ...denied, step: [a] };
  assert.deepEqual(plan(missing).map(([action, call]) => [action, call.id]), [['run', 'call_1_1'], ['deny', 'call_1_2']]);
});

test('failure messages: the SDK errors as their text, others with their name and stack', () => {
  assert.equal(failureMessage(new AgentError('no such order')), 'no such order');
  assert.equal(
    failureMessage(new HostError('closed', 'the turn is suspended')),
    'the host refused an effect: closed: the turn is suspended',
  );
  const error = new TypeError('the kettle is empty');
  error.stack = 'pour@agent.js:3:9\nexport_guest$handle@/tmp/x/sources/initializer.js:1:1\n';
  assert.equal(failureMessage(error), 'TypeError: the kettle is empty\nStack (innermost first):\n  at pour@agent.js:3:9');
  assert.equal(failureMessage('plain'), 'uncaught exception: plain');
  assert.equal(failureMessage({ code: 7 }), 'uncaught exception: {"code":7}');
});

test('input text is a JSON string or an object field `text`', () => {
  assert.equal(inputText('hi'), 'hi');
  assert.equal(inputText({ text: 'hi', more: 1 }), 'hi');
  assert.equal(inputText({ text: 1 }), undefined);
  assert.equal(inputText(7), undefined);
});
