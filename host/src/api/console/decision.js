// decision.js: the approve / deny form of a pending gated tool call
// (POST /sessions/{id}/approval), used inline in a session and in the inbox:
// the call's arguments editable in place (approving with changes sends them,
// docs/approvals.md "Richer decisions"), and a message for the agent.

import { api, seg } from './api.js';
import { describe, field, h } from './dom.js';

/**
 * A form deciding the pending call of `sessionId` (`call`: its
 * TOOL_APPROVAL_REQUIRED payload). `onDecided(answer)` gets the 202 body; a
 * failure (409: already decided, 422: arguments the tool's schema refuses)
 * is shown in the form.
 */
export function decisionForm(sessionId, ctx, onDecided, call) {
  const original = JSON.stringify(call ? call.arguments : null);
  const args = h('textarea', { name: 'arguments', rows: '3', spellcheck: 'false', autocomplete: 'off' });
  args.value = JSON.stringify(call ? call.arguments : null, null, 2);
  const [argsField] = field('Arguments (edit them to approve with changes)', args);
  const message = h('input', { type: 'text', name: 'message', maxlength: '4096', autocomplete: 'off' });
  const [messageField] = field('Message to the agent (optional; e.g. why you deny)', message);
  const approver = h('input', { type: 'text', name: 'approver', maxlength: '200', autocomplete: 'off' });
  const myName = ctx.me && ctx.me.name;
  // Short enough for a phone's field; the label says what an empty one means.
  approver.placeholder = myName || 'your key\'s name';
  const [approverField] = field('Approver (optional; empty: your key\'s name)', approver);
  const approve = h('button', { type: 'button', class: 'approve' }, 'Approve');
  const deny = h('button', { type: 'button', class: 'deny' }, 'Deny');
  const error = h('p', { class: 'form-error', role: 'alert' });
  const note = { show: (text) => { error.textContent = text; }, clear: () => { error.textContent = ''; } };
  const decide = async (approved) => {
    note.clear();
    const body = { approved };
    const name = approver.value.trim();
    if (name) body.approver = name;
    const text = message.value.trim();
    if (text) body.message = text;
    if (approved && call) {
      let edited;
      try {
        edited = JSON.parse(args.value);
      } catch {
        note.show('The arguments are not JSON: fix them, or put back the original.');
        return;
      }
      if (JSON.stringify(edited) !== original) body.arguments = edited;
    }
    approve.disabled = true;
    deny.disabled = true;
    try {
      const answer = await api('POST', `/sessions/${seg(sessionId)}/approval`, body);
      onDecided(answer);
    } catch (failure) {
      approve.disabled = false;
      deny.disabled = false;
      note.show(failure.status === 409
        ? 'This call was already decided, or nothing is pending any more.'
        : describe(failure));
    }
  };
  approve.addEventListener('click', () => decide(true));
  deny.addEventListener('click', () => decide(false));
  return h('div', { class: 'decision' },
    call ? h('details', { class: 'edit-arguments' }, h('summary', null, 'Edit the arguments'), argsField) : null,
    h('div', { class: 'decision-row' }, approverField, messageField, h('div', { class: 'buttons' }, approve, deny)),
    error);
}
