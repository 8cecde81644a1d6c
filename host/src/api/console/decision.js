// decision.js: the approve / deny form of a pending gated tool call
// (POST /sessions/{id}/approval), used inline in a session and in the inbox.

import { api, seg } from './api.js';
import { describe, field, h } from './dom.js';

/**
 * A form deciding the pending call of `sessionId`. `onDecided(answer)` gets
 * the 202 body; a failure (409: already decided) is shown in the form.
 */
export function decisionForm(sessionId, ctx, onDecided) {
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
    h('div', { class: 'decision-row' }, approverField, h('div', { class: 'buttons' }, approve, deny)),
    error);
}
