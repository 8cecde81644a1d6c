// keys.js: API keys: the list (GET /api-keys, never a secret), minting
// (POST /api-keys: the secret is shown here once, then dropped from the page)
// and revoking (DELETE /api-keys/{id}, confirmed in place).

import { api, seg } from './api.js';
import { act, describe, field, h, notice, table, time } from './dom.js';

export function render(main, ctx) {
  const note = notice();
  const minted = h('div');
  const { el, body, row } = table(['Name', 'Class', 'App', 'Prefix', 'Created', 'Last used', ''], 'API keys');
  const create = createForm(note, minted, () => load());
  main.append(
    h('h1', null, 'API keys'),
    h('p', { class: 'lead' }, 'Platform keys reach everything; an invocation key reaches the sessions '
      + 'of one app and is meant to ship in a frontend. The server keeps only a hash of each key.'),
    note.el,
    minted,
    create.el,
    h('section', { class: 'card' }, h('h2', null, 'Keys'), el));

  let apps = [];
  const load = async () => {
    const keys = await api('GET', '/api-keys');
    const slug = (id) => (apps.find((a) => a.id === id) || {}).slug || id;
    body.replaceChildren(...keys.map((k) => row([
      h('span', null, k.name, k.id === ctx.me?.id ? h('span', { class: 'tag' }, 'you') : null),
      k.class,
      k.app_id ? slug(k.app_id) : '—',
      h('code', null, k.prefix),
      time(k.created_at),
      time(k.last_used_at),
      revoke(k, ctx, note, load),
    ], { dataset: { key: k.id, name: k.name } })));
  };
  api('GET', '/apps')
    .then((list) => {
      apps = list;
      create.setApps(list);
    })
    .then(load)
    .catch((error) => note.show(describe(error), 'error'));
  return () => {};
}

function revoke(key, ctx, note, reload) {
  const cell = h('span', { class: 'buttons' });
  const start = h('button', { type: 'button', class: 'small danger' }, 'Revoke');
  const ask = () => {
    const yes = h('button', { type: 'button', class: 'small danger' }, `Revoke ${key.name}`);
    const no = h('button', { type: 'button', class: 'small quiet' }, 'Cancel');
    const mine = key.id === ctx.me?.id;
    const warning = h('span', { class: 'small' }, mine ? 'This is your key: you will be signed out. ' : 'Sure? ');
    cell.replaceChildren(warning, yes, no);
    no.addEventListener('click', () => {
      cell.replaceChildren(start);
      start.focus();
    });
    yes.addEventListener('click', () => act(yes, note, async () => {
      await api('DELETE', `/api-keys/${seg(key.id)}`);
      await reload();
      note.show(`Revoked ${key.name}. Anything still using it now gets 401, and its open streams ended.`, 'ok');
    }));
    yes.focus();
  };
  start.addEventListener('click', ask);
  cell.append(start);
  return cell;
}

function createForm(note, minted, reload) {
  const cls = h('select', { name: 'class' },
    h('option', { value: 'platform' }, 'platform'),
    h('option', { value: 'invocation' }, 'invocation'));
  const name = h('input', { type: 'text', name: 'name', maxlength: '100', required: true, autocomplete: 'off' });
  const app = h('select', { name: 'app', disabled: true });
  const [clsField] = field('Class', cls);
  const [nameField] = field('Name', name, 'A person or a use, e.g. on-call or web frontend.');
  const [appField] = field('App', app, 'Invocation keys only.');
  const button = h('button', { type: 'submit' }, 'Create key');
  const form = h('form', { novalidate: true },
    h('div', { class: 'row' }, clsField, nameField, appField), button);
  cls.addEventListener('change', () => {
    app.disabled = cls.value !== 'invocation';
  });
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    act(button, note, async () => {
      note.clear();
      const request = { class: cls.value, name: name.value };
      if (cls.value === 'invocation') request.app = app.value;
      const key = await api('POST', '/api-keys', request);
      name.value = '';
      showOnce(minted, key);
      await reload();
    });
  });
  return {
    el: h('section', { class: 'card' }, h('h2', null, 'Create a key'), form),
    setApps(list) {
      app.replaceChildren(...list.map((a) => h('option', { value: a.slug }, a.slug)));
    },
  };
}

/** The new key's secret, once: gone from the page when dismissed or the view is left. */
function showOnce(minted, key) {
  const secret = h('input', {
    type: 'text', readonly: true, value: key.key, class: 'secret', spellcheck: 'false',
    'aria-label': `The new key ${key.name}`,
  });
  const copy = h('button', { type: 'button', class: 'small' }, 'Copy');
  const done = h('button', { type: 'button', class: 'small quiet' }, 'I have saved it');
  const status = h('span', { class: 'small', role: 'status' });
  copy.addEventListener('click', () => {
    secret.select();
    navigator.clipboard.writeText(key.key)
      .then(() => { status.textContent = 'Copied.'; })
      .catch(() => { status.textContent = 'Selected: press Ctrl+C (⌘C) to copy.'; });
  });
  const panel = h('section', { class: 'card minted', role: 'region', 'aria-label': 'New key' },
    h('h2', null, `New ${key.class} key: ${key.name}`),
    h('p', null, 'Copy it now. The server keeps only its hash and cannot show it again.'),
    h('div', { class: 'secret-row' }, secret, copy, status),
    done);
  const dismiss = () => {
    panel.remove();
    const heading = document.querySelector('main h1');
    if (heading) heading.focus();
  };
  done.addEventListener('click', dismiss);
  panel.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') dismiss();
  });
  minted.replaceChildren(panel);
  secret.focus();
  secret.select();
}
