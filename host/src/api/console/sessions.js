// sessions.js: the sessions list (GET /sessions, newest first, refreshed
// every few seconds so statuses stay live), its filters (app, status, the
// end user who owns a session), and starting a new session (POST /sessions).

import { api, seg } from './api.js';
import { act, badge, describe, every, field, h, notice, shortId, table, time } from './dom.js';

const STATUSES = ['running', 'idle', 'awaiting_approval', 'errored', 'ended'];

export function render(main) {
  const note = notice();
  const appFilter = h('select', { name: 'app-filter' }, h('option', { value: '' }, 'All apps'));
  const statusFilter = h('select', { name: 'status-filter' }, h('option', { value: '' }, 'Any status'),
    STATUSES.map((s) => h('option', { value: s }, s.replace(/_/g, ' '))));
  const [appField] = field('App', appFilter);
  const [statusField] = field('Status', statusFilter);
  const userFilter = h('input', { type: 'search', name: 'user-filter', autocomplete: 'off',
    placeholder: 'Any end user' });
  const [userField] = field('End user', userFilter);
  const { el, body, row } = table(['Session', 'App', 'End user', 'Route', 'Version', 'Status', 'Turn',
    'Updated'], 'Sessions');
  const empty = h('p', { class: 'empty', hidden: true }, 'No session matches.');
  const more = h('button', { type: 'button', class: 'quiet', hidden: true }, 'Load more');
  const create = newSession(note);

  main.append(
    h('h1', null, 'Sessions'),
    note.el,
    create.el,
    h('section', { class: 'card' },
      h('div', { class: 'filters' }, appField, statusField, userField),
      el, empty, more));

  let shown = 50;
  const rows = new Map();
  const load = async () => {
    const query = new URLSearchParams({ limit: String(Math.min(shown, 500)) });
    if (appFilter.value) query.set('app', appFilter.value);
    if (statusFilter.value) query.set('status', statusFilter.value);
    if (userFilter.value.trim()) query.set('user', userFilter.value.trim());
    const page = await api('GET', `/sessions?${query}`);
    update(page.items);
    more.hidden = !page.next_cursor || shown >= 500;
    empty.hidden = page.items.length > 0;
  };
  // Rows are updated in place, so focus and reading position survive a refresh.
  const update = (items) => {
    const keep = new Set(items.map((s) => s.session_id));
    for (const [id, tr] of rows) {
      if (!keep.has(id)) {
        tr.remove();
        rows.delete(id);
      }
    }
    let previous = null;
    for (const s of items) {
      const cells = [
        h('a', { href: `#/sessions/${seg(s.session_id)}`, title: s.session_id }, shortId(s.session_id)),
        s.app, endUser(s), s.route, `v${s.deployment_version}`, badge(s.status), String(s.turn),
        time(s.updated_at),
      ];
      let tr = rows.get(s.session_id);
      if (!tr) {
        tr = row(cells, { dataset: { session: s.session_id } });
        rows.set(s.session_id, tr);
        if (previous) previous.after(tr);
        else body.prepend(tr);
      } else if (tr.dataset.updated !== s.updated_at) {
        // Only the changing cells; the link keeps its focus.
        tr.children[5].replaceChildren(badge(s.status));
        tr.children[6].textContent = String(s.turn);
        tr.children[7].replaceChildren(time(s.updated_at));
      }
      tr.dataset.updated = s.updated_at;
      tr.dataset.status = s.status;
      previous = tr;
    }
  };
  const reset = () => act(null, note, async () => {
    for (const tr of rows.values()) tr.remove();
    rows.clear();
    await load();
  });
  appFilter.addEventListener('change', reset);
  statusFilter.addEventListener('change', reset);
  // The user filter applies when the operator presses Enter or leaves it.
  userFilter.addEventListener('change', reset);
  more.addEventListener('click', () => act(more, note, async () => {
    shown += 50;
    await load();
  }));

  api('GET', '/apps').then((apps) => {
    for (const app of apps) appFilter.append(h('option', { value: app.slug }, app.slug));
    create.setApps(apps);
  }).catch((error) => note.show(describe(error), 'error'));

  return every(3000, async () => {
    try {
      await load();
    } catch (error) {
      note.show(describe(error), 'error');
    }
  });
}

/** Who owns a session: its end user, or a dash for a key's own session. */
export function endUser(s) {
  return s.end_user ? h('span', { class: 'end-user', title: s.end_user }, s.end_user)
    : h('span', { class: 'no-user', title: 'Created with an API key, not by an end user' }, '—');
}

/** The "new session" form: app, route (the app's current routes), input. */
function newSession(note) {
  const app = h('select', { name: 'app', required: true });
  const route = h('select', { name: 'route', required: true });
  const input = h('input', { type: 'text', name: 'input', required: true, autocomplete: 'off' });
  const asJson = h('input', { type: 'checkbox', name: 'json' });
  const [appField] = field('App', app);
  const [routeField] = field('Route', route);
  const [inputField] = field('First input', input);
  const button = h('button', { type: 'submit' }, 'Start session');
  inputField.classList.add('grow');
  const form = h('form', { class: 'new-session', novalidate: true },
    h('div', { class: 'row' }, appField, routeField, inputField),
    h('div', { class: 'buttons' }, button, h('label', { class: 'check' }, asJson, ' Send the input as JSON')));
  let apps = [];
  const fillRoutes = () => {
    const chosen = apps.find((a) => a.slug === app.value);
    route.replaceChildren(...(chosen ? chosen.routes : []).map((r) => h('option', { value: r }, r)));
  };
  app.addEventListener('change', fillRoutes);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    act(button, note, async () => {
      note.clear();
      let value = input.value;
      if (asJson.checked) {
        try {
          value = JSON.parse(input.value);
        } catch {
          note.show('The input is not valid JSON.', 'error');
          return;
        }
      }
      if (!app.value || !route.value) {
        note.show('Choose an app with a current deployment, and a route.', 'error');
        return;
      }
      const created = await api('POST', '/sessions', { app: app.value, route: route.value, input: value });
      location.hash = `#/sessions/${seg(created.session_id)}`;
    });
  });
  return {
    // Open on wide screens; on a phone the list comes first.
    el: h('details', { class: 'card new-session-card', open: matchMedia('(min-width: 701px)').matches },
      h('summary', null, h('h2', null, 'New session')), form),
    setApps(list) {
      apps = list.filter((a) => a.current_deployment);
      app.replaceChildren(...apps.map((a) => h('option', { value: a.slug }, a.slug)));
      fillRoutes();
    },
  };
}
