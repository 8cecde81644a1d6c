/**
 * bench: `agenthost bench`'s agent (docs/bench.md) in TypeScript, the same
 * routes and behaviour as `examples/bench` and `examples/python/bench`, so
 * the three languages are measured by the same client:
 * `agenthost bench --app bench-ts`.
 *
 * - `/stream`: input `{"deltas": N}` (default 50, at most 999 000) streams N
 *   deltas of `"tok "` as assistant messages (at most 100 000 per message),
 *   then the turn ends.
 * - `/approve`: one call of `gated_noop`, gated in code, so the turn
 *   suspends; the resumed turn (the SDK ran the call before the handler)
 *   says `done`.
 */

import { Agent, type Turn } from '@agenthost/sdk';

const DEFAULT_DELTAS = 50;
const MAX_DELTAS = 999_000;
const DELTAS_PER_MESSAGE = 100_000;

const agent = new Agent({ routes: ['/stream', '/approve'] });

agent.tool({
  name: 'gated_noop',
  description: 'Does nothing, after a human approved it.',
  needsApproval: true,
  run: () => ({ ok: true }),
});

function stream(turn: Turn): void {
  const input = turn.input as { deltas?: unknown } | null;
  let deltas = typeof input === 'object' && input !== null ? input.deltas : undefined;
  if (typeof deltas !== 'number' || !Number.isInteger(deltas) || deltas < 0) {
    deltas = DEFAULT_DELTAS;
  }
  let left = Math.min(deltas as number, MAX_DELTAS);
  while (left > 0) {
    const message = turn.message();
    for (let i = 0; i < Math.min(left, DELTAS_PER_MESSAGE); i++) {
      message.write('tok ');
    }
    message.finish();
    left -= DELTAS_PER_MESSAGE;
  }
}

async function approve(turn: Turn): Promise<void> {
  if (!turn.resumed) {
    await turn.runTools([{ name: 'gated_noop', arguments: {} }], 'the benchmark asks for a decision');
  }
  turn.say('done');
}

agent.handler((turn) => (turn.route === '/approve' ? approve(turn) : stream(turn)));

export default agent;
