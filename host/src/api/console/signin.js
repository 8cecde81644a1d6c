// signin.js: the sign-in form. The key is checked with `GET /apps` (which
// needs a platform key) before it is kept, in this tab's sessionStorage only.

import { api, auth } from './api.js';
import { act, field, h, notice } from './dom.js';

export function render(main, { notice: refusal, signedIn }) {
  const note = notice();
  const input = h('input', {
    type: 'password', autocomplete: 'off', spellcheck: 'false', required: true,
    autocapitalize: 'off',
  });
  const [keyField] = field('API key', input,
    'A platform key (ahp_…) or the bootstrap key. It stays in this tab until you sign out or close it.');
  const button = h('button', { type: 'submit' }, 'Sign in');
  const form = h('form', { class: 'card signin-form', novalidate: true }, keyField, button);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    act(button, note, () => check(input.value.trim(), note, signedIn));
  });
  main.append(h('section', { class: 'signin' },
    h('h1', null, 'Sign in to agenthost'),
    h('p', { class: 'lead' }, 'The console manages the apps, sessions, approvals, API keys and '
      + 'secrets of this server. It talks to the server\'s HTTP API with your key.'),
    note.el,
    form));
  if (refusal) note.show(refusal, 'error');
  input.focus();
  return () => {};
}

/** Whether `key` has an end-user token's form (a minted `ahu1.` token or a
 * JWT), as the server tells them from keys (host/src/end_users/mod.rs). */
function endUserToken(key) {
  return key.startsWith('ahu1.') || (key.startsWith('eyJ') && key.split('.').length === 3);
}

async function check(key, note, signedIn) {
  note.clear();
  if (!key) {
    note.show('Paste a key first.', 'error');
    return;
  }
  if (!/^[\x21-\x7e]+$/.test(key)) {
    note.show('A key is printable ASCII without spaces.', 'error');
    return;
  }
  try {
    await api('GET', '/apps', undefined, key);
  } catch (error) {
    if (error.status === 401) {
      note.show('The server refused this key: it is unknown, malformed or revoked.', 'error');
      return;
    }
    if (error.status === 403) {
      note.show(`${endUserToken(key)
        ? 'This is an end-user token, which reaches its own user\'s sessions only.'
        : 'This is an invocation key, which reaches the sessions of one app only.'} `
        + 'The console needs a platform key.', 'error');
      return;
    }
    throw error;
  }
  auth.signIn(key);
  // A new hash routes by itself (hashchange); otherwise route to the current one.
  if (!location.hash || location.hash === '#/') location.hash = '#/deployments';
  else signedIn();
}
