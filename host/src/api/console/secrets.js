// secrets.js: secrets by name (GET /secrets), set or rotated
// (PUT /secrets/{name}) and deleted (DELETE /secrets/{name}). A value is
// typed into a password field, sent and cleared; none is ever shown.

import { api, seg } from './api.js';
import { act, describe, field, h, notice, table, time } from './dom.js';

export function render(main) {
  const note = notice();
  const { el, body, row } = table(['Name', 'Created', 'Value set', ''], 'Secrets');
  const empty = h('p', { class: 'empty', hidden: true }, 'No secret yet.');
  const name = h('input', {
    type: 'text', name: 'name', maxlength: '128', required: true, autocomplete: 'off', spellcheck: 'false',
    pattern: '[A-Za-z_][A-Za-z0-9_]*',
  });
  const value = h('input', { type: 'password', name: 'value', required: true, autocomplete: 'new-password' });
  const [nameField] = field('Name', name, 'An environment variable name, e.g. OPENAI_API_KEY.');
  const [valueField] = field('Value', value, 'Sealed at rest; never shown again, here or by the API.');
  const button = h('button', { type: 'submit' }, 'Set secret');
  const form = h('form', { novalidate: true }, h('div', { class: 'row' }, nameField, valueField), button);

  main.append(
    h('h1', null, 'Secrets'),
    h('p', { class: 'lead' }, 'Agents get the secrets their manifest declares as environment '
      + 'variables. Setting an existing name rotates it from the next turn on.'),
    note.el,
    h('section', { class: 'card' }, h('h2', null, 'Set a secret'), form),
    h('section', { class: 'card' }, h('h2', null, 'Secrets'), el, empty));

  const load = async () => {
    const secrets = await api('GET', '/secrets');
    empty.hidden = secrets.length > 0;
    body.replaceChildren(...secrets.map((s) => row([
      h('code', null, s.name),
      time(s.created_at),
      time(s.updated_at),
      remove(s, note, load),
    ], { dataset: { secret: s.name } })));
  };
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    act(button, note, async () => {
      note.clear();
      const secret = name.value.trim();
      if (!secret || !value.value) {
        note.show('Give both a name and a value.', 'error');
        return;
      }
      const set = await api('PUT', `/secrets/${seg(secret)}`, { value: value.value });
      value.value = '';
      name.value = '';
      // The list first, then the word: a "Rotated" on screen means the
      // rows below are the new ones (nothing is redrawn under a click).
      await load();
      // A rotation keeps created_at (200); a new secret has both times equal (201).
      note.show(set.created_at === set.updated_at ? `Created ${secret}.` : `Rotated ${secret}.`, 'ok');
    });
  });
  load().catch((error) => note.show(describe(error), 'error'));
  return () => {};
}

function remove(secret, note, reload) {
  const cell = h('span', { class: 'buttons' });
  const start = h('button', { type: 'button', class: 'small danger' }, 'Delete');
  start.addEventListener('click', () => {
    const yes = h('button', { type: 'button', class: 'small danger' }, `Delete ${secret.name}`);
    const no = h('button', { type: 'button', class: 'small quiet' }, 'Cancel');
    cell.replaceChildren(h('span', { class: 'small' }, 'Agents that declare it will fail. '), yes, no);
    no.addEventListener('click', () => {
      cell.replaceChildren(start);
      start.focus();
    });
    yes.addEventListener('click', () => act(yes, note, async () => {
      await api('DELETE', `/secrets/${seg(secret.name)}`);
      note.show(`Deleted ${secret.name}.`, 'ok');
      await reload();
    }));
    yes.focus();
  });
  cell.append(start);
  return cell;
}
