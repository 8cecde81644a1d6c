// session.js: one session, live: its details, its journal drawn as a chat
// as it streams (transcript.js over stream.js), a box to send the next
// input (POST /sessions/{id}/input; queued while a turn runs) that becomes the approve / deny form
// while a gated call waits, and an operator's controls: cancel the
// running turn (POST /sessions/{id}/cancel), end the session (…/end);
// its schedules (GET /sessions/{id}/schedules) and queued inputs.
// The page follows new output while the reader is at its end.

import { api, seg } from './api.js';
import { act, badge, describe, field, h, notice, shortId, time } from './dom.js';
import { follow } from './stream.js';
import { Transcript } from './transcript.js';
import { decisionForm } from './decision.js';
import { endUser } from './sessions.js';

/** An input as a person reads it: a string, an object's `text` (or its
 * one string field), else compact JSON. */
function inputText(input) {
  if (typeof input === 'string') return input;
  if (input && typeof input === 'object' && !Array.isArray(input)) {
    if (typeof input.text === 'string') return input.text;
    const strings = Object.values(input).filter((v) => typeof v === 'string');
    if (Object.keys(input).length === 1 && strings.length === 1) return strings[0];
  }
  return JSON.stringify(input);
}

/** The status an event leaves the session in, if it changes it. */
// Who made a schedule (`created_by`, docs/schedules.md).
const CREATORS = { platform: 'a platform key', agent: 'the agent', end_user: 'the end user' };

const AFTER = {
  TURN_STARTED: 'running',
  TURN_ENDED: 'idle',
  TURN_ERROR: 'errored',
  TOOL_APPROVAL_REQUIRED: 'awaiting_approval',
  SESSION_ENDED: 'ended',
};

export function render(main, ctx, id) {
  const note = notice();
  const status = h('span', { class: 'session-status' });
  const turn = h('span');
  const facts = h('dl', { class: 'facts-inline' });
  const connection = h('p', { class: 'connection', role: 'status' }, 'Connecting…');
  const transcript = new Transcript(id, ctx);
  const input = h('textarea', { name: 'message', rows: '1' });
  const [inputField] = field('Message', input, 'Enter sends; Shift+Enter starts a new line.', true);
  const send = h('button', { type: 'submit', disabled: true }, 'Send');
  const composer = h('form', { class: 'composer card', novalidate: true }, inputField, send);
  // Where the box is, while a gated call waits for a decision.
  const dock = h('div', { class: 'decision-dock card', hidden: true, role: 'region', 'aria-label': 'Decision' });
  const cancel = h('button', { type: 'button', class: 'cancel-turn', hidden: true }, 'Cancel turn');
  const end = h('button', { type: 'button', class: 'end-session', hidden: true }, 'End session');
  const actions = h('div', { class: 'session-actions' }, cancel, end);
  // The session's schedules (its agent's timers and the API's) and how
  // many inputs wait, read again when the stream says they changed.
  const queued = h('span', { class: 'queued-count' }, '0');
  const scheduleList = h('ul', { class: 'schedule-list' });
  const schedules = h('section', { class: 'schedules card', hidden: true, 'aria-label': 'Schedules' },
    h('h2', null, 'Schedules'), scheduleList);

  main.append(
    h('p', { class: 'crumbs' }, h('a', { href: '#/sessions' }, 'Sessions'), ' / ', shortId(id)),
    h('div', { class: 'view-head' }, h('h1', null, 'Session ', h('code', null, shortId(id))), status, actions),
    facts,
    schedules,
    connection,
    note.el,
    transcript.el,
    composer,
    dock);

  let state = null;
  const setStatus = (value) => {
    state = value;
    status.replaceChildren(badge(value));
    status.dataset.status = value;
    // The box stays usable (a draft survives a turn); while a turn runs,
    // sending queues the message for a turn of its own (on_busy: enqueue).
    send.disabled = !(value === 'idle' || value === 'errored' || value === 'running');
    send.textContent = value === 'running' ? 'Queue' : 'Send';
    cancel.hidden = value !== 'running';
    end.hidden = value === 'ended';
    input.placeholder = {
      running: 'The agent is working… (a message now waits for its turn)',
      awaiting_approval: 'Waiting for a decision',
      ended: 'The session has ended',
    }[value] || 'Message the agent';
  };

  // Following new output: the page scrolls to its end after each event
  // while the reader was at the end (or has just sent a message), and
  // stays put while they read further up. A session opens at its end.
  const page = document.documentElement;
  // Only the reader scrolling up leaves the end: the page's own scroll to
  // its end may be measured after more output arrived, and must not.
  let atEnd = true;
  let lastY = window.scrollY;
  const onScroll = () => {
    const y = window.scrollY;
    if (window.innerHeight + y >= page.scrollHeight - 80) atEnd = true;
    else if (y < lastY) atEnd = false;
    lastY = y;
  };
  window.addEventListener('scroll', onScroll, { passive: true });
  let pending = false;
  const keepScrolled = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      if (atEnd) window.scrollTo(0, page.scrollHeight);
    });
  };

  // The decision replaces the box while a call waits for one.
  let waitingOn = null;
  const showDecision = (p) => {
    waitingOn = p.tool_call_id;
    const form = decisionForm(id, ctx, () => hideDecision(), p);
    dock.replaceChildren(
      h('p', { class: 'approval-title' }, h('strong', null, 'Needs approval: '), h('code', null, p.name),
        p.reason ? h('span', { class: 'muted' }, ` · ${p.reason}`) : null),
      form);
    dock.dataset.call = p.tool_call_id;
    dock.hidden = false;
    composer.hidden = true;
  };
  const hideDecision = () => {
    waitingOn = null;
    dock.hidden = true;
    dock.replaceChildren();
    delete dock.dataset.call;
    composer.hidden = false;
  };

  let stop = () => {};
  let left = false;
  // One read at a time; an event during a read asks for one more after it.
  let reading = false;
  let again = false;
  const readSchedules = async () => {
    if (reading) { again = true; return; }
    reading = true;
    try {
      do {
        again = false;
        const [list, s] = await Promise.all([
          api('GET', `/sessions/${seg(id)}/schedules`),
          api('GET', `/sessions/${seg(id)}`),
        ]);
        if (left) return;
        scheduleList.replaceChildren(...list.map((x) => {
          const remove = h('button', { type: 'button', class: 'small delete-schedule' }, 'Delete');
          remove.addEventListener('click', () => act(remove, note, async () => {
            await api('DELETE', `/sessions/${seg(id)}/schedules/${seg(x.id)}`);
            readSchedules();
          }));
          // The reader's own time; the cron's zone is the schedule's.
          return h('li', { dataset: { scheduleId: x.id } },
            time(x.at),
            x.cron ? h('code', null, ` ${x.cron} (${x.timezone})`) : null,
            ' · ', h('span', { class: 'schedule-input' }, inputText(x.input)),
            x.created_by ? h('span', { class: 'created-by' }, ` · by ${CREATORS[x.created_by] ?? x.created_by}`) : null,
            ' ', remove);
        }));
        schedules.hidden = list.length === 0;
        queued.textContent = String(s.queued_inputs ?? 0);
      } while (again);
    } catch (error) {
      // A key that may not read schedules (or a lost connection): the last list stays.
    } finally {
      reading = false;
    }
  };
  const CHANGES_SCHEDULES = new Set(['TURN_SCHEDULED', 'TURN_SCHEDULE_CANCELLED', 'TURN_STARTED',
    'INPUT_QUEUED', 'SESSION_ENDED']);
  api('GET', `/sessions/${seg(id)}`).then((s) => {
    if (left) return;
    const pair = (name, value) => h('div', null, h('dt', null, name), h('dd', null, value));
    facts.replaceChildren(
      pair('App', s.app),
      pair('End user', endUser(s)),
      pair('Route', s.route),
      pair('Deployment', `v${s.deployment_version}`),
      pair('Turn', turn),
      pair('Queued', queued),
      pair('Id', h('code', null, s.session_id)));
    turn.textContent = String(s.turn);
    queued.textContent = String(s.queued_inputs ?? 0);
    readSchedules();
    setStatus(s.status);
    transcript.speaker = s.end_user ?? null;
    stop = follow(id, {
      onEvent(event) {
        keepScrolled();
        transcript.apply(event);
        if (event.type === 'TOOL_APPROVAL_REQUIRED') showDecision(event.payload);
        else if (waitingOn && (event.type === 'TOOL_APPROVAL_GRANTED' || event.type === 'TOOL_APPROVAL_DENIED'
          || event.type === 'SESSION_ENDED')) hideDecision();
        if (AFTER[event.type]) setStatus(AFTER[event.type]);
        if (event.type === 'TURN_STARTED') turn.textContent = String(event.payload.turn);
        if (CHANGES_SCHEDULES.has(event.type)) readSchedules();
      },
      onState({ state: now, resumedAfter, error }) {
        connection.dataset.state = now;
        connection.textContent = {
          live: resumedAfter === null || resumedAfter === undefined
            ? 'Live'
            : `Live · reconnected, resumed after event ${resumedAfter}`,
          reconnecting: 'Connection lost · reconnecting…',
          ended: 'The session has ended; its journal is complete.',
          closed: `The stream was closed: ${error ? describe(error) : 'unknown reason'}`,
        }[now];
      },
    });
  }).catch((error) => {
    connection.textContent = '';
    note.show(error.status === 404 ? 'No session has this id.' : describe(error), 'error');
  });

  // Both answer once the turn's ending is committed; the stream shows it.
  const control = async (button, path, body) => {
    button.disabled = true;
    note.clear();
    try {
      await api('POST', `/sessions/${seg(id)}/${path}`, body);
    } catch (error) {
      note.show(describe(error), 'error');
    }
    button.disabled = false;
  };
  cancel.addEventListener('click', () => control(cancel, 'cancel'));
  // Ending is for good: the first click asks, the second ends.
  let confirmTimer = null;
  end.addEventListener('click', () => {
    if (!end.dataset.confirm) {
      end.dataset.confirm = 'yes';
      end.textContent = 'End for good';
      confirmTimer = setTimeout(() => {
        delete end.dataset.confirm;
        end.textContent = 'End session';
      }, 5000);
      return;
    }
    clearTimeout(confirmTimer);
    delete end.dataset.confirm;
    end.textContent = 'End session';
    control(end, 'end', { reason: 'ended from the console' });
  });

  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      composer.requestSubmit();
    }
  });
  composer.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (send.disabled) return;
    send.disabled = true;
    note.clear();
    // Whoever sends wants to see the answer: to the end at once, so that a
    // scroll event still on its way reads the page as at its end.
    window.scrollTo(0, page.scrollHeight);
    atEnd = true;
    try {
      const body = { input: input.value };
      if (state === 'running') body.on_busy = 'enqueue';
      await api('POST', `/sessions/${seg(id)}/input`, body);
      input.value = '';
    } catch (error) {
      note.show(describe(error), 'error');
    }
    // The stream says what the session does next (TURN_STARTED, ...).
    setStatus(state);
  });

  return () => {
    left = true;
    window.removeEventListener('scroll', onScroll);
    stop();
  };
}
