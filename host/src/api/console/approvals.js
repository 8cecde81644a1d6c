// approvals.js: the approvals inbox: every pending gated tool call across
// apps (GET /approvals, refreshed every few seconds), decided in place.

import { api, seg } from './api.js';
import { badge, describe, every, field, h, json, notice, shortId, time } from './dom.js';
import { decisionForm } from './decision.js';

export function render(main, ctx) {
  const note = notice();
  const appFilter = h('select', { name: 'app-filter' }, h('option', { value: '' }, 'All apps'));
  const [appField] = field('App', appFilter);
  const list = h('div', { class: 'stack' });
  const empty = h('p', { class: 'empty', hidden: true }, 'Nothing is waiting for a decision.');
  main.append(
    h('h1', null, 'Approvals'),
    h('p', { class: 'lead' }, 'Gated tool calls wait here until someone approves or denies them. '
      + 'The turn resumes from the decision in a fresh instance.'),
    note.el,
    h('div', { class: 'filters' }, appField),
    empty,
    list);

  // Cards are kept by session; a decided card stays until the view is left.
  const cards = new Map();
  const load = async () => {
    const query = new URLSearchParams({ limit: '100' });
    if (appFilter.value) query.set('app', appFilter.value);
    const page = await api('GET', `/approvals?${query}`);
    const pending = new Set(page.items.map((item) => item.session.session_id));
    for (const [id, card] of cards) {
      if (!pending.has(id) && !card.dataset.decided) {
        card.remove();
        cards.delete(id);
      }
    }
    let previous = null;
    for (const item of page.items) {
      const id = item.session.session_id;
      let card = cards.get(id);
      if (!card || card.dataset.call !== item.event.payload.tool_call_id) {
        if (card) card.remove();
        card = approvalCard(item, ctx);
        cards.set(id, card);
        if (previous) previous.after(card);
        else list.prepend(card);
      }
      previous = card;
    }
    empty.hidden = cards.size > 0;
  };
  appFilter.addEventListener('change', () => {
    for (const card of cards.values()) card.remove();
    cards.clear();
    load().catch((error) => note.show(describe(error), 'error'));
  });
  api('GET', '/apps').then((apps) => {
    for (const app of apps) appFilter.append(h('option', { value: app.slug }, app.slug));
  }).catch((error) => note.show(describe(error), 'error'));

  return every(3000, async () => {
    try {
      await load();
    } catch (error) {
      note.show(describe(error), 'error');
    }
  });
}

function approvalCard(item, ctx) {
  const { session, event } = item;
  const p = event.payload;
  const outcome = h('div', { class: 'approval' });
  const card = h('article', {
    class: 'card inbox-item',
    dataset: { session: session.session_id, call: p.tool_call_id, tool: p.name },
  },
  h('h2', null, h('code', null, p.name), h('span', { class: 'muted' }, ` in ${session.app}`)),
  h('dl', { class: 'facts' },
    h('dt', null, 'Session'),
    h('dd', null, h('a', { href: `#/sessions/${seg(session.session_id)}` }, shortId(session.session_id)),
      ' ', badge(session.status)),
    h('dt', null, 'Asked'), h('dd', null, time(event.created_at)),
    h('dt', null, 'Gated by'), h('dd', null, (p.gated_by || []).join(', ')),
    h('dt', null, 'Reason'), h('dd', null, p.reason || '—')),
  h('div', { class: 'muted small' }, `Arguments of ${p.tool_call_id}`),
  json(p.arguments),
  outcome);
  const form = decisionForm(session.session_id, ctx, (answer) => {
    card.dataset.decided = answer.approved ? 'approved' : 'denied';
    form.replaceWith(h('p', { class: `outcome outcome-${card.dataset.decided}`, role: 'status' },
      `${answer.approved ? 'Approved' : 'Denied'} by ${answer.approver}; turn ${answer.turn} is running. `,
      h('a', { href: `#/sessions/${seg(session.session_id)}` }, 'Watch it')));
  });
  outcome.append(form);
  return card;
}
