// approvals.js: the approvals inbox: every pending gated tool call across
// apps, kept live by the approvals feed (feed.js), decided in place.

import { api, seg } from './api.js';
import { badge, describe, field, h, json, notice, shortId, time } from './dom.js';
import { followApprovals } from './feed.js';
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
  const place = (item) => {
    const id = item.session.session_id;
    const old = cards.get(id);
    if (old && old.dataset.call === item.event.payload.tool_call_id) return;
    if (old) old.remove();
    const card = approvalCard(item, ctx);
    cards.set(id, card);
    list.append(card); // oldest request first: a new one joins the end
  };
  const drop = (id) => {
    const card = cards.get(id);
    if (card && !card.dataset.decided) {
      card.remove();
      cards.delete(id);
    }
  };
  const shown = () => {
    empty.hidden = cards.size > 0;
  };
  let stop = () => {};
  let feedFailed = false;
  const follow = () => {
    stop();
    for (const card of cards.values()) card.remove();
    cards.clear();
    stop = followApprovals(appFilter.value, {
      onSnapshot: (items) => {
        const pending = new Set(items.map((item) => item.session.session_id));
        for (const id of [...cards.keys()]) if (!pending.has(id)) drop(id);
        for (const item of items) place(item);
        shown();
      },
      onEntry: (kind, entry) => {
        if (kind === 'APPROVAL_REQUESTED') {
          const session = {
            session_id: entry.session_id, app: entry.app, status: 'awaiting_approval', end_user: entry.end_user,
          };
          place({ session, event: entry.event });
        } else if (kind === 'APPROVAL_DECIDED') {
          // Decided here or elsewhere: the card says so until the view is left.
          const card = cards.get(entry.session_id);
          const decision = entry.event?.payload;
          if (card && decision && card.dataset.call === entry.tool_call_id && !card.dataset.decided) {
            card.settle(entry.event.type === 'TOOL_APPROVAL_GRANTED', decision.approver);
          }
        } else {
          drop(entry.session_id); // withdrawn: the session ended or was deleted
        }
        shown();
      },
      onState: ({ state, error }) => {
        if (state === 'live' && feedFailed) note.clear();
        feedFailed = Boolean(error);
        if (error) note.show(describe(error), 'error');
      },
    });
  };
  appFilter.addEventListener('change', follow);
  api('GET', '/apps').then((apps) => {
    for (const app of apps) appFilter.append(h('option', { value: app.slug }, app.slug));
  }).catch((error) => note.show(describe(error), 'error'));

  follow();
  return () => stop();
}

function approvalCard(item, ctx) {
  const { session, event } = item;
  const p = event.payload;
  const outcome = h('div', { class: 'approval' });
  const status = h('span', { class: 'inbox-status' }, badge(session.status));
  const card = h('article', {
    class: 'card inbox-item',
    dataset: { session: session.session_id, call: p.tool_call_id, tool: p.name },
  },
  h('h2', null, h('code', null, p.name), h('span', { class: 'muted' }, ` in ${session.app}`)),
  h('dl', { class: 'facts' },
    h('dt', null, 'Session'),
    h('dd', null, h('a', { href: `#/sessions/${seg(session.session_id)}` }, shortId(session.session_id)),
      ' ', status),
    h('dt', null, 'Asked by'), h('dd', { class: 'asked-by' },
      session.end_user ? h('span', null, 'end user ', h('code', null, session.end_user)) : 'an API key'),
    h('dt', null, 'Asked'), h('dd', null, time(event.created_at)),
    h('dt', null, 'Gated by'), h('dd', null, (p.gated_by || []).join(', ')),
    h('dt', null, 'Reason'), h('dd', null, p.reason || '—')),
  h('div', { class: 'muted small' }, `Arguments of ${p.tool_call_id}`),
  json(p.arguments),
  outcome);
  // The card's outcome, from this console's answer or from the feed,
  // whichever comes first (the answer's text, naming the turn, wins).
  card.settle = (approved, approver, turn) => {
    card.dataset.decided = approved ? 'approved' : 'denied';
    // No longer awaiting approval: the decision resumes the turn.
    status.replaceChildren(badge('running'));
    status.dataset.status = 'running';
    const running = turn ? `turn ${turn} is running` : 'the turn resumes';
    outcome.replaceChildren(h('p', { class: `outcome outcome-${card.dataset.decided}`, role: 'status' },
      `${approved ? 'Approved' : 'Denied'} by ${approver}; ${running}. `,
      h('a', { href: `#/sessions/${seg(session.session_id)}` }, 'Watch it')));
  };
  const form = decisionForm(session.session_id, ctx, (answer) => {
    card.settle(answer.approved, answer.approver, answer.turn);
  }, p);
  outcome.append(form);
  return card;
}
