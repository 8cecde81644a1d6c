// dom.js: builds elements without HTML strings. Every piece of text, whoever
// wrote it (an agent, a user, the server), goes in as a text node.

/** `h('a', {href: '#/x', class: 'y', onclick: fn}, 'text', child)`. */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      el.addEventListener(name.slice(2), value);
    } else if (name === 'class') {
      el.className = value;
    } else if (name === 'value') {
      el.value = value;
    } else if (name === 'dataset') {
      Object.assign(el.dataset, value);
    } else {
      el.setAttribute(name, value === true ? '' : String(value));
    }
  }
  add(el, children);
  return el;
}

/** Appends children: nodes as they are, anything else as text. */
export function add(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

let nextId = 0;
/** A unique element id, for labels. */
export function uid(prefix) {
  nextId += 1;
  return `${prefix}-${nextId}`;
}

/** A `<time>` in the reader's locale; an em dash when there is none. */
export function time(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return h('time', { datetime: iso }, iso);
  const options = { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' };
  if (date.getFullYear() !== new Date().getFullYear()) options.year = 'numeric';
  return h('time', { datetime: iso, title: date.toString() }, date.toLocaleString(undefined, options));
}

/** A coloured status word. */
export function badge(status) {
  return h('span', { class: `badge badge-${String(status).replace(/[^a-z_]/g, '')}` },
    String(status).replace(/_/g, ' '));
}

/** Any JSON value as text: on one line when short, else pretty-printed. */
export function json(value) {
  const flat = JSON.stringify(value) ?? 'null';
  return h('pre', { class: 'json' }, flat.length <= 72 ? flat : JSON.stringify(value, null, 2));
}

/** The end of a UUID, enough to tell sessions apart on screen (UUIDv7s start with the time). */
export function shortId(id) {
  return `…${String(id).slice(-8)}`;
}

/** A labelled form field: returns [wrapper, control]. */
export function field(label, control, hint, hideLabel = false) {
  const id = control.id || uid('f');
  control.id = id;
  const hintEl = hint ? h('small', { class: 'hint', id: `${id}-hint` }, hint) : null;
  if (hintEl) control.setAttribute('aria-describedby', hintEl.id);
  const labelEl = h('label', { for: id, class: hideLabel ? 'visually-hidden' : null }, label);
  return [h('div', { class: 'field' }, labelEl, control, hintEl), control];
}

/**
 * A message area for a view: `show(text, kind)` ('error' is an alert read out
 * at once; anything else a polite status), `clear()`.
 */
export function notice() {
  const el = h('div', { class: 'notice', hidden: true });
  const live = h('div', { class: 'live-region', role: 'status' });
  const alert = h('div', { class: 'live-region', role: 'alert' });
  const box = h('div', null, el, live, alert);
  return {
    el: box,
    show(text, kind = 'ok') {
      el.hidden = false;
      el.className = `notice notice-${kind}`;
      el.textContent = text;
      (kind === 'error' ? alert : live).textContent = text;
    },
    clear() {
      el.hidden = true;
      el.textContent = '';
      live.textContent = '';
      alert.textContent = '';
    },
  };
}

/** The text of an error for a person: the API's message, with its code. */
export function describe(error) {
  if (error && error.code && error.code !== 'network') return `${error.message} (${error.code})`;
  return error && error.message ? error.message : String(error);
}

/**
 * Runs `task` for a button: disables it meanwhile and reports a failure in
 * `note`, so no rejection is ever left unhandled.
 */
export async function act(button, note, task) {
  if (button) button.disabled = true;
  try {
    await task();
  } catch (error) {
    if (note) note.show(describe(error), 'error');
  } finally {
    if (button && button.isConnected) button.disabled = false;
  }
}

/** A table whose cells carry their column name (stacked on narrow screens). */
export function table(columns, caption) {
  const body = h('tbody');
  const el = h('table', { class: 'rows' },
    caption ? h('caption', { class: 'visually-hidden' }, caption) : null,
    h('thead', null, h('tr', null, columns.map((c) => h('th', { scope: 'col' }, c)))),
    body);
  const row = (cells, props) => h('tr', props, cells.map((cell, i) =>
    h('td', { 'data-label': columns[i] }, cell)));
  return { el, body, row };
}

/** Calls `task` now and every `ms` until the returned stop function runs. */
export function every(ms, task) {
  let stopped = false;
  let timer = null;
  const tick = async () => {
    try {
      await task();
    } catch {
      // The task shows its own errors; the next tick tries again.
    }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
