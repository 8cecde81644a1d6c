// transcript.js: a session's events (docs/events.md) drawn as a chat:
// messages growing delta by delta, tool calls with their results, approvals
// (decided inline), turn markers, inputs queued while a turn ran, timers
// the agent set or cancelled, errors
// and outbound HTTP. Event types it does not know are ignored, as the API
// asks of clients.

import { add, badge, h, json } from './dom.js';

export class Transcript {
  constructor(sessionId, ctx) {
    this.sessionId = sessionId;
    this.ctx = ctx;
    this.messages = new Map();
    this.calls = new Map();
    this.requests = new Map();
    /** The end user whose session it is (their id names their messages). */
    this.speaker = null;
    /** Why the turn being drawn runs (its TURN_STARTED's `reason.kind`). */
    this.turnReason = null;
    this.el = h('div', { class: 'transcript', role: 'log', 'aria-label': 'Conversation' });
  }

  /** Draws one event envelope. */
  apply(event) {
    const p = event.payload || {};
    switch (event.type) {
      case 'SESSION_CREATED':
        this.line('created', `Session created on ${p.app} ${p.route}, deployment v${p.deployment_version}.`);
        break;
      case 'TURN_STARTED': {
        this.turnReason = p.reason ? p.reason.kind : null;
        const why = {
          approval_decision: ' · resumed after the decision',
          schedule: ' · a schedule came due',
        }[this.turnReason] ?? '';
        this.line('turn', `Turn ${p.turn}${why}`);
        break;
      }
      case 'MESSAGE_START':
        this.messageStart(p);
        break;
      case 'MESSAGE_DELTA': {
        const message = this.messages.get(p.message_id);
        if (message && p.delta && typeof p.delta.text === 'string') {
          message.text.append(p.delta.text);
          message.deltas += 1;
          message.el.dataset.deltas = String(message.deltas);
        }
        break;
      }
      case 'MESSAGE_END':
        this.messageEnd(p);
        break;
      case 'TOOL_CALL':
        this.toolCall(p);
        break;
      case 'TOOL_RESULT':
        this.toolResult(p);
        break;
      case 'TOOL_APPROVAL_REQUIRED':
        this.approvalRequired(p);
        break;
      case 'TOOL_APPROVAL_GRANTED':
      case 'TOOL_APPROVAL_DENIED':
        this.decided(p, event.type === 'TOOL_APPROVAL_GRANTED');
        break;
      case 'TURN_ERROR':
        this.el.append(h('div', { class: 'turn-error', dataset: { kind: p.kind } },
          h('strong', null, `Turn ${p.turn} failed: ${p.kind}`),
          h('p', null, p.message)));
        break;
      case 'INPUT_QUEUED': {
        const text = typeof p.input === 'string' ? p.input : JSON.stringify(p.input);
        const where = p.position === 1 ? 'runs next' : `position ${p.position}`;
        const el = this.line('queued', p.interrupt
          ? `Queued to interrupt the running turn: ${text}`
          : `Queued (${where}): ${text}`);
        el.dataset.inputId = p.input_id;
        break;
      }
      case 'TURN_SCHEDULED': {
        const text = typeof p.input === 'string' ? p.input : JSON.stringify(p.input);
        const el = this.line('scheduled', `Scheduled for ${p.at}: ${text}`);
        el.dataset.scheduleId = p.schedule_id;
        break;
      }
      case 'TURN_SCHEDULE_CANCELLED':
        this.line('scheduled', `Cancelled the schedule ${p.schedule_id}`).dataset.scheduleId = p.schedule_id;
        break;
      case 'SESSION_ENDED':
        this.line('ended', p.key_id
          ? `Ended by key ${p.key_id}${p.reason ? `: ${p.reason}` : ''}.`
          : 'The agent ended the session.');
        break;
      case 'HTTP_REQUEST':
        this.requests.set(p.request_id,
          this.line('http', `→ ${p.method} ${p.origin}${p.path}`));
        break;
      case 'HTTP_REQUEST_DENIED':
        this.line('http denied', `✕ ${p.method} ${p.origin}${p.path} refused: ${p.reason}`);
        break;
      case 'HTTP_RESPONSE': {
        const request = this.requests.get(p.request_id);
        const outcome = p.error
          ? ` ← ${p.status ?? 'no response'}: ${p.error}`
          : ` ← ${p.status} · ${p.bytes} bytes · ${p.duration_ms} ms`;
        if (request) request.append(outcome);
        break;
      }
      default:
        break;
    }
  }

  line(kind, text) {
    const el = h('div', { class: `line line-${kind.split(' ')[0]} ${kind}` }, text);
    this.el.append(el);
    return el;
  }

  messageStart(p) {
    const text = h('p', { class: 'text' });
    // A turn's input: typed by its end user (named), by whoever holds a key
    // ("User"), or set earlier by a schedule (not typed now by anyone).
    const scheduled = p.role === 'user' && this.turnReason === 'schedule';
    const who = p.role !== 'user' ? 'Agent' : scheduled ? 'Scheduled input' : (this.speaker ?? 'User');
    const el = h('article', {
      class: `msg msg-${p.role === 'user' ? 'user' : 'assistant'}${scheduled ? ' msg-scheduled' : ''} streaming`,
      dataset: { message: p.message_id, role: p.role, deltas: '0' },
    }, h('div', { class: 'who' }, who), text);
    this.messages.set(p.message_id, { el, text, deltas: 0 });
    this.el.append(el);
  }

  messageEnd(p) {
    const message = this.messages.get(p.message_id);
    if (!message) return;
    message.text.textContent = p.text;
    message.el.classList.remove('streaming');
    if (p.incomplete) add(message.el, h('div', { class: 'muted small' }, 'The turn ended before this message was finished.'));
  }

  toolCall(p) {
    const result = h('div', { class: 'result' });
    const approval = h('div', { class: 'approval' });
    const el = h('article', { class: 'tool', dataset: { call: p.tool_call_id, tool: p.name } },
      h('div', { class: 'tool-head' },
        h('span', { class: 'muted' }, 'Tool call'), ' ',
        h('code', null, p.name), ' ',
        h('span', { class: 'muted small' }, p.tool_call_id)),
      json(p.arguments),
      approval,
      result);
    this.calls.set(p.tool_call_id, { el, result, approval });
    this.el.append(el);
  }

  call(p) {
    if (!this.calls.has(p.tool_call_id)) this.toolCall({ ...p, arguments: p.arguments ?? null });
    return this.calls.get(p.tool_call_id);
  }

  toolResult(p) {
    const call = this.call(p);
    call.el.dataset.result = p.status;
    call.result.replaceChildren(
      h('div', null, h('span', { class: 'muted' }, 'Result '), badge(p.status)),
      json(p.output));
  }

  approvalRequired(p) {
    const call = this.call(p);
    call.el.classList.add('gated', 'pending');
    // The decision itself is made where the message box is (session.js):
    // on a phone, a form inside the transcript sat behind the sticky box.
    const where = h('p', { class: 'muted small decide-below' }, 'Approve or deny it in the box below.');
    call.where = where;
    call.approval.replaceChildren(
      h('p', { class: 'approval-title' }, h('strong', null, 'Needs approval'),
        ` · gated by ${(p.gated_by || []).join(', ')}`),
      p.reason ? h('p', { class: 'reason' }, `Agent's reason: ${p.reason}`) : null,
      where);
  }

  decided(p, approved) {
    const call = this.call(p);
    call.el.classList.remove('pending');
    call.el.dataset.decision = approved ? 'approved' : 'denied';
    if (call.where) call.where.remove();
    call.where = null;
    const how = p.arguments !== undefined ? ' with edited arguments'
      : p.result !== undefined ? ', answered in place of the tool' : '';
    call.approval.append(h('p', { class: `outcome outcome-${approved ? 'approved' : 'denied'}` },
      `${approved ? 'Approved' : 'Denied'} by ${p.approver}${how}`,
      p.message ? h('span', { class: 'decision-message' }, `: “${p.message}”`) : null));
    if (p.arguments !== undefined) call.approval.append(json(p.arguments));
  }
}
