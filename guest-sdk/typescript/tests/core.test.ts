// Unit tests of the SDK's core: JSON text, schemas, history paging, the end
// user, the resumed step's plan, failure messages.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { AgentError, HostError } from '../src/errors.ts';
import { failureMessage } from '../src/export.ts';
import { History, type Page, readEndUser } from '../src/history.ts';
import { dumps } from '../src/json.ts';
import { AddressProhibited, HttpError, journaledRefusal, RequestDenied } from '../src/http.ts';
import { complete, plan, resumeStep } from '../src/resume.ts';
import { authorFrame, Mapper } from '../src/stack.ts';
import { check, withDefaults } from '../src/schema.ts';
import { callFromWire } from '../src/tools.ts';
import { inputText, Turn } from '../src/turn.ts';

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

test('the end user and its claims come from SESSION_CREATED, read with one call', () => {
  const asked: [bigint | undefined, number][] = [];
  const firstIs =
    (payload: unknown, eventType = 'SESSION_CREATED') =>
    (after: bigint | undefined, limit: number): Page => {
      asked.push([after, limit]);
      return { events: [{ seq: 0n, eventType, payload }], next: 0n };
    };
  const created = {
    app: 'shop',
    route: '/chat',
    input: 'hi',
    end_user: { id: 'ada', claims: { email: 'ada@example.com', plan: 'pro' } },
  };
  assert.deepEqual(readEndUser(firstIs(created)), { id: 'ada', claims: { email: 'ada@example.com', plan: 'pro' } });
  assert.deepEqual(asked, [[undefined, 1]]);
  // No claims listed: the journal leaves `claims` out.
  assert.deepEqual(readEndUser(firstIs({ end_user: { id: 'bob' } })), { id: 'bob', claims: {} });
  // A session created with a key has none.
  assert.equal(readEndUser(firstIs({ app: 'shop', input: null })), null);
  // An unexpected journal is an error, as is the host's.
  for (const bad of [
    firstIs({}, 'TURN_STARTED'),
    firstIs({ end_user: { id: 7 } }),
    firstIs({ end_user: { id: 'ada', claims: ['email'] } }),
    firstIs({ end_user: 'ada' }),
    () => ({ events: [], next: undefined }),
  ]) {
    assert.throws(() => readEndUser(bad), AgentError);
  }
  assert.throws(
    () =>
      readEndUser(() => {
        throw new HostError('unavailable', 'storage down');
      }),
    HostError,
  );
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

test('a given result answers the pending call without running it; the decision is completed from its event', () => {
  const a = callFromWire('call_1_1', 'add', '{"n":1}');
  const d = callFromWire('call_1_2', 'delete', '{"name":"x"}');
  const decision = { approved: false, approver: 'alice', call: d, step: [a, d] } as Parameters<typeof plan>[0];
  complete(decision, [
    { seq: 1n, eventType: 'TOOL_APPROVAL_GRANTED', payload: { tool_call_id: 'other', message: 'no' } },
    {
      seq: 2n,
      eventType: 'TOOL_APPROVAL_GRANTED',
      payload: { tool_call_id: 'call_1_2', result: { n: 1 }, message: 'by hand', original_arguments: { name: 'y' } },
    },
    { seq: 3n, eventType: 'TURN_STARTED', payload: { turn: 2 } },
  ]);
  assert.equal(decision.approved, true);
  assert.deepEqual([decision.result, decision.message, decision.originalArguments], [{ n: 1 }, 'by hand', { name: 'y' }]);
  assert.deepEqual(plan(decision).map(([action, call]) => [action, call.id]), [['run', 'call_1_1'], ['answer', 'call_1_2']]);
  const plain = { approved: false, approver: 'alice', call: d, step: [d] };
  complete(plain, [{ seq: 1n, eventType: 'TOOL_APPROVAL_DENIED', payload: { tool_call_id: 'call_1_2' } }]);
  assert.deepEqual(plain, { approved: false, approver: 'alice', call: d, step: [d] });
});

test('a step already resumed is not run again', async () => {
  const pending = callFromWire('c2', 'delete', '{"name":"x"}');
  const turn = new Turn(
    { sessionId: 's', number: 2, route: '/chat', inputJson: '"go"', decision: { approved: true, approver: 'alice', call: pending, step: [pending] }, env: {} },
    new Map(),
  );
  const done = [{ id: 'c2', name: 'delete', status: 'ok' as const, output: { deleted: 'x' } }];
  turn.resumed = done;
  // Runs nothing (no host here: a report would throw), the same results.
  assert.equal(await resumeStep(turn, new Map()), done);
  assert.equal(turn.pendingResult, done[0]);
});

test('failure messages: the SDK errors as their text, others with their name and stack', () => {
  assert.equal(failureMessage(new AgentError('no such order')), 'no such order');
  assert.equal(
    failureMessage(new HostError('closed', 'the turn is suspended')),
    'the host refused an effect: closed: the turn is suspended',
  );
  const error = new TypeError('the kettle is empty');
  error.stack = 'pour@agent.js:3:9\nexport_guest$handle@/tmp/x/sources/initializer.js:1:1\n';
  assert.equal(failureMessage(error), 'TypeError: the kettle is empty\nStack (innermost first):\n  at pour (agent.js:3:9)');
  assert.equal(failureMessage('plain'), 'uncaught exception: plain');
  assert.equal(failureMessage({ code: 7 }), 'uncaught exception: {"code":7}');
});

test('stack frames map back to the source through the source map', () => {
  // Bundle line 1 from a.ts 1:1 (column 0) and, at column 4, from b.ts 3:7;
  // line 2 has no mapping; line 3, column 2, from a.ts 10:5 (a negative delta).
  const mapper = new Mapper({ sources: ['a.ts', 'b.ts'], mappings: 'AAAA,ICEM;;EDOF' });
  assert.deepEqual(mapper.lookup(1, 1), { source: 'a.ts', line: 1, column: 1 });
  assert.deepEqual(mapper.lookup(1, 3), { source: 'a.ts', line: 1, column: 1 });
  assert.deepEqual(mapper.lookup(1, 9), { source: 'b.ts', line: 3, column: 7 });
  assert.equal(mapper.lookup(2, 1), undefined);
  assert.deepEqual(mapper.lookup(3, 3), { source: 'a.ts', line: 10, column: 5 });
  assert.equal(mapper.lookup(9, 1), undefined);
  assert.equal(authorFrame('pour@agent.js:1:5', mapper), 'pour (b.ts:3:7)');
  assert.equal(authorFrame('@agent.js:3:4', mapper), '<anonymous> (a.ts:10:5)');
  assert.equal(authorFrame('pour@agent.js:2:1', mapper), 'pour (agent.js:2:1)');
  assert.equal(authorFrame('f@other.js:1:1', mapper), 'f (other.js:1:1)');
  assert.equal(authorFrame('not a frame', mapper), 'not a frame');
  assert.equal(authorFrame('pour@agent.js:1:5', null), 'pour (agent.js:1:5)');
});

test('a refused fetch is explained by the latest unexplained refusal of its origin in this turn', () => {
  const denied = (seq: bigint, id: string, origin: string, reason: string) => ({
    seq,
    eventType: 'HTTP_REQUEST_DENIED',
    payload: { request_id: id, method: 'GET', origin, path: '/', reason },
  });
  const allowlist = "the origin is not on this deployment's outbound allowlist";
  const events = [
    denied(1n, 'r0', 'http://a.test', allowlist), // an earlier turn's
    { seq: 2n, eventType: 'TURN_STARTED', payload: { turn: 2 } },
    denied(3n, 'r1', 'http://a.test', allowlist),
    denied(4n, 'r2', 'http://b.test:8080', 'b.test resolves to loopback address 127.0.0.1; private addresses need the operator\'s --outbound-allow-private'),
    denied(5n, 'r3', 'http://c.test', 'DNS resolution failed: no such host'),
  ];
  const read = (): Page => ({ events, next: undefined });
  const first = journaledRefusal('http://a.test', read);
  assert.ok(first instanceof RequestDenied);
  assert.equal(
    first.message,
    "the host refused the request to http://a.test: it is not on this deployment's outbound allowlist ([outbound] allow in agenthost.toml)",
  );
  // Each refusal explains one failure; the earlier turn's none.
  assert.equal(journaledRefusal('http://a.test', read), undefined);
  assert.ok(journaledRefusal('http://b.test:8080', read) instanceof AddressProhibited);
  const dns = journaledRefusal('http://c.test', read);
  assert.ok(dns instanceof HttpError);
  assert.equal(dns.message, 'the host refused the request to http://c.test: DNS resolution failed: no such host');
  assert.equal(journaledRefusal('http://d.test', read), undefined);
  const broken = (): Page => {
    throw new HostError('closed', 'the turn is suspended');
  };
  assert.equal(journaledRefusal('http://a.test', broken), undefined);
});

test('input text is a JSON string or an object field `text`', () => {
  assert.equal(inputText('hi'), 'hi');
  assert.equal(inputText({ text: 'hi', more: 1 }), 'hi');
  assert.equal(inputText({ text: 1 }), undefined);
  assert.equal(inputText(7), undefined);
});
