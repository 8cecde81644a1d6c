// Unit tests of `approver` on a tool: the keyword the host reads at deploy.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Agent } from '../src/agent.ts';
import { APPROVER_KEYWORD, withApprover } from '../src/tools.ts';

test("approver 'end_user' marks the tool's schema; the default and 'operator' leave it as it is", () => {
  const schema = { type: 'object', properties: {} };
  const agent = new Agent({ routes: ['/shop'] });
  agent.tool({ name: 'mine', description: '', parameters: schema, needsApproval: true, approver: 'end_user', run: () => 1 });
  agent.tool({ name: 'theirs', description: '', parameters: schema, needsApproval: true, run: () => 1 });
  const tools = (agent as unknown as { tools: Map<string, { parameters: Record<string, unknown> }> }).tools;
  assert.equal(tools.get('mine')?.parameters[APPROVER_KEYWORD], 'end_user');
  assert.equal(tools.get('theirs')?.parameters[APPROVER_KEYWORD], undefined);
  assert.equal((schema as Record<string, unknown>)[APPROVER_KEYWORD], undefined, 'the schema given is not changed');
  assert.equal(withApprover('t', schema, 'operator'), schema);
  assert.throws(() => withApprover('t', schema, 'anyone'), /approver must be 'end_user' or 'operator'/);
});
