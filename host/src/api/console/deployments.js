// deployments.js: every app and its deployments (GET /apps,
// GET /apps/{id}/deployments): status, version, build error; activate a
// retired deployment or roll back to it (POST /deployments/{id}/activate).

import { api, seg } from './api.js';
import { act, add, badge, describe, every, h, notice, table, time } from './dom.js';

export function render(main) {
  const note = notice();
  const list = h('div', { class: 'stack', 'aria-busy': 'true' });
  const refresh = h('button', { type: 'button', class: 'quiet' }, 'Refresh');
  main.append(
    h('div', { class: 'view-head' },
      h('h1', null, 'Deployments'),
      refresh),
    h('p', { class: 'lead' }, 'Each app runs its current deployment; sessions stay on the '
      + 'deployment they started with. Deploy with ', h('code', null, 'agenthost deploy'), '.'),
    note.el,
    list);

  // What is drawn, so that a poll that finds nothing new redraws nothing
  // (an open build error, the focus and the scroll stay as they are).
  let drawn = null;
  const load = async (force = false) => {
    try {
      const apps = await api('GET', '/apps');
      const rows = await Promise.all(apps.map((app) =>
        api('GET', `/apps/${seg(app.id)}/deployments`)));
      const seen = JSON.stringify([apps, rows]);
      if (!force && seen === drawn) return;
      drawn = seen;
      list.replaceChildren(...(apps.length
        ? apps.map((app, i) => appCard(app, rows[i], note, () => load(true)))
        : [h('p', { class: 'empty' }, 'No app yet. Deploy one with ',
          h('code', null, 'agenthost deploy path/to/agent'), '.')]));
      list.setAttribute('aria-busy', 'false');
    } catch (error) {
      note.show(describe(error), 'error');
    }
  };
  refresh.addEventListener('click', () => act(refresh, note, async () => {
    note.clear();
    await load(true);
  }));
  // Follow builds: a deployment made elsewhere (`agenthost deploy`, `dev`'s
  // watch) appears and its build resolves without Refresh, as sessions poll.
  const stop = every(3000, () => load());
  return stop;
}

function appCard(app, deployments, note, reload) {
  const current = deployments.find((d) => d.active);
  const tools = app.tools.map((t) => (t.needs_approval ? `${t.name} (needs approval)` : t.name));
  const { el, body, row } = table(['Version', 'Status', 'Uploaded', 'Built', ''],
    `Deployments of ${app.slug}`);
  for (const d of deployments) {
    const status = h('span', null, badge(d.status));
    if (d.active) add(status, [' ', h('span', { class: 'tag' }, 'current')]);
    body.append(row([
      h('span', { class: 'version' }, `v${d.version}`),
      status,
      time(d.created_at),
      time(d.finished_at),
      action(app, d, current, note, reload),
    ], { dataset: { deployment: d.id, version: String(d.version), status: d.status } }));
    if (d.error) {
      body.append(h('tr', { class: 'error-row' }, h('td', { colspan: '5' },
        h('details', { open: true },
          h('summary', null, `Build error of v${d.version}`),
          h('pre', { class: 'build-error' }, d.error)))));
    }
  }
  return h('section', { class: 'card app', dataset: { app: app.slug } },
    h('div', { class: 'app-head' },
      h('h2', null, app.slug),
      h('span', { class: 'muted' }, current ? `current: v${current.version}` : 'no successful build yet')),
    h('dl', { class: 'facts' },
      h('dt', null, 'Routes'), h('dd', null, app.routes.length ? app.routes.join(', ') : '—'),
      h('dt', null, 'Tools'), h('dd', null, tools.length ? tools.join(', ') : '—')),
    el);
}

function action(app, d, current, note, reload) {
  if (d.status !== 'retired') return '';
  const older = current && d.version < current.version;
  const label = older ? `Roll back to v${d.version}` : `Activate v${d.version}`;
  const button = h('button', { type: 'button', class: 'small' }, label);
  button.addEventListener('click', () => act(button, note, async () => {
    await api('POST', `/deployments/${seg(d.id)}/activate`);
    note.show(`v${d.version} is now the current deployment of ${app.slug}. `
      + 'New sessions start on it; existing sessions keep theirs.', 'ok');
    await reload();
  }));
  return button;
}
