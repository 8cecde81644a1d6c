// Timers (`Turn.schedule`, `Turn.cancelSchedule`): the arguments the SDK
// checks before the host sees them; under plain Node the host imports are
// stubs that throw, so a well-formed call reaches them.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Turn } from '../src/turn.ts';

const turn = () => new Turn({ sessionId: 's', number: 1, route: '/chat', inputJson: '"go"', decision: undefined, env: {} }, new Map());

test('schedule takes exactly one of afterMs and at', () => {
  assert.throws(() => turn().schedule({ text: 'later' }, {}), TypeError);
  assert.throws(() => turn().schedule({ text: 'later' }, { afterMs: 1, at: '2026-12-01T09:00:00Z' }), TypeError);
});

test('a well-formed schedule or cancel reaches the host', () => {
  const outside = /only inside a component/;
  assert.throws(() => turn().schedule({ text: 'later' }, { afterMs: 2000 }), outside);
  assert.throws(() => turn().schedule('later', { at: new Date('2026-12-01T08:00:00Z') }), outside);
  assert.throws(() => turn().cancelSchedule('019aa8e2-7b3c-7d4e-8f10-1234567890ab'), outside);
});
