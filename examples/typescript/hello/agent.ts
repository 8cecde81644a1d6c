/**
 * hello: a deterministic chat agent on `/chat` that echoes its input word by
 * word, remembers, through the session's journal, what was said before, and
 * says whom it serves (the session's end user) when asked "who am i".
 *
 * The same agent as `examples/hello` (Rust) and `examples/python/hello`.
 */

import { Agent, type Turn } from '@agenthost/sdk';

const agent = new Agent({ routes: ['/chat'] });

agent.tool({
  name: 'word_count',
  description: 'Counts the words of `text`.',
  parameters: {
    type: 'object',
    properties: { text: { type: 'string', default: '' } },
    additionalProperties: false,
  },
  run: ({ text }: { text: string }) => words(text).length,
});

agent.handler((turn) => {
  const text = turn.inputText;
  if (text === undefined) {
    throw new TypeError('send text as the input');
  }
  // The rule: an input that starts with "what did I say" (in any case)
  // is answered from the journal instead of echoed.
  if (text.toLowerCase().startsWith('what did i say')) {
    return recall(turn);
  }
  // And an input of exactly "who am i" is answered with the end user.
  if (text === 'who am i') {
    return whoami(turn);
  }
  const reply = turn.message();
  reply.write('You said:');
  for (const word of words(text)) {
    reply.write(` ${word}`);
  }
  reply.finish();
});

/** Answers with the user's messages of earlier turns, oldest first. */
function recall(turn: Turn): void {
  const said = turn
    .history()
    .messages()
    .filter((m) => m.role === 'user')
    .map((m) => m.text);
  said.pop(); // the last one is this very question
  if (said.length === 0) {
    return turn.say('You have not said anything before.');
  }
  turn.say(`Before, you said: ${said.map((s) => JSON.stringify(s)).join(', ')}`);
}

/** Answers with the session's end user and their email claim, if any. */
function whoami(turn: Turn): void {
  const user = turn.endUser();
  if (user === null) {
    return turn.say('You are anonymous.');
  }
  const email = user.claims.email;
  turn.say(`You are ${user.id} (${typeof email === 'string' ? email : 'no email'}).`);
}

function words(text: string): string[] {
  return text.split(/\s+/).filter((w) => w !== '');
}

export default agent;
