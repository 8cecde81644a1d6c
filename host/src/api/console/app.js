// app.js: the console's shell: the hash router (#/deployments, #/sessions,
// #/sessions/<id>, #/approvals, #/keys, #/secrets), the header, sign-out,
// and what happens when the server refuses the key.

import { api, auth, keyId, onRefused } from './api.js';
import { h } from './dom.js';
import { followApprovals } from './feed.js';
import * as signin from './signin.js';
import * as deployments from './deployments.js';
import * as sessions from './sessions.js';
import * as session from './session.js';
import * as approvals from './approvals.js';
import * as keys from './keys.js';
import * as secrets from './secrets.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
const whoName = document.getElementById('who-name');
const count = document.getElementById('approvals-count');

/** What the views share: who is signed in, and a refresh of the approvals count. */
const ctx = { me: null };
let leave = null;
let stopShell = null;
let refusal = null;

const REFUSED = 'The server refused your key: it was revoked or is no longer valid. '
  + 'Sign in with another key.';

function path() {
  try {
    return location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  } catch {
    return [];
  }
}

function views(name, id) {
  switch (name) {
    case '':
    case 'deployments': return deployments.render;
    case 'sessions': return id ? session.render : sessions.render;
    case 'approvals': return approvals.render;
    case 'keys': return keys.render;
    case 'secrets': return secrets.render;
    default: return null;
  }
}

function route() {
  if (leave) leave();
  leave = null;
  main.replaceChildren();
  if (!auth.key()) {
    shell(false);
    leave = signin.render(main, { notice: refusal, signedIn: route });
    refusal = null;
    return;
  }
  shell(true);
  const [name = '', id] = path();
  const render = views(name, id);
  if (!render) {
    location.replace('#/deployments');
    return;
  }
  const current = name || 'deployments';
  for (const link of nav.querySelectorAll('a')) {
    if (link.dataset.view === current) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  leave = render(main, ctx, id);
  const heading = main.querySelector('h1');
  if (heading) {
    heading.tabIndex = -1;
    heading.focus();
  }
}

/** The signed-in header: who I am and the pending approvals count. */
function shell(signedIn) {
  nav.hidden = !signedIn;
  who.hidden = !signedIn;
  document.body.classList.toggle('signed-in', signedIn);
  if (signedIn && !stopShell) {
    ctx.me = { id: keyId(auth.key()), name: null };
    whoName.textContent = '';
    loadMe();
    stopShell = followCount();
  } else if (!signedIn && stopShell) {
    stopShell();
    stopShell = null;
    ctx.me = null;
  }
}

async function loadMe() {
  try {
    const list = await api('GET', '/api-keys');
    const mine = list.find((k) => k.id === ctx.me?.id);
    if (mine && ctx.me) {
      ctx.me.name = mine.name;
      whoName.textContent = `Signed in as ${mine.name}`;
    }
  } catch {
    // The name is a nicety; a refused key is handled by onRefused.
  }
}

/**
 * Keeps the header's count of pending approvals from the approvals feed (a
 * session waits on at most one call): no polling, and a request or a
 * decision made anywhere shows at once. Returns a function that stops it.
 */
function followCount() {
  const pending = new Set();
  const show = () => {
    const shown = String(pending.size);
    count.hidden = pending.size === 0;
    count.dataset.pending = shown;
    count.replaceChildren(shown, h('span', { class: 'visually-hidden' }, ' pending'));
  };
  return followApprovals('', {
    onSnapshot: (items) => {
      pending.clear();
      for (const item of items) pending.add(item.session.session_id);
      show();
    },
    onEntry: (kind, entry) => {
      if (kind === 'APPROVAL_REQUESTED') pending.add(entry.session_id);
      else pending.delete(entry.session_id);
      show();
    },
    // Revoking the key ends the feed, and its reconnection is refused: an
    // idle console notices within a second.
    onState: ({ error }) => {
      if (error?.status === 401) refusedKey();
    },
  });
}

/** The server refused the signed-in key: forget it, say so at sign-in. */
function refusedKey() {
  auth.signOut();
  refusal = REFUSED;
  route();
}

onRefused(refusedKey);

document.getElementById('sign-out').addEventListener('click', () => {
  auth.signOut();
  route();
});

// The skip link moves the focus without touching the hash (the router's).
document.querySelector('.skip').addEventListener('click', (event) => {
  event.preventDefault();
  (main.querySelector('h1') || main).focus();
});

window.addEventListener('hashchange', route);
route();
