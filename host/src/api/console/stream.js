// stream.js: follows a session's journal with an EventSource. An
// EventSource cannot send the key, so each connection gets a fresh stream
// token (POST /sessions/{id}/stream-token, valid 15 minutes for connecting)
// and, after a drop, resumes strictly after the last event seen
// (`last_event_id`); events already seen are never applied twice.

import { api, seg } from './api.js';

/**
 * Calls `onEvent(envelope)` for each event once, in order, and
 * `onState({state, resumedAfter, error})` as the connection changes: `live`,
 * `reconnecting`, `ended` (after SESSION_ENDED) or `closed` (refused).
 * Returns a function that stops following.
 */
export function follow(sessionId, { onEvent, onState }) {
  let source = null;
  let timer = null;
  let stopped = false;
  let ended = false;
  let lastId = null;
  let lastSeq = -1;
  let drops = 0;
  let attempt = 0;

  const retry = () => {
    if (stopped) return;
    const delay = Math.min(10000, 500 * 2 ** attempt);
    attempt += 1;
    timer = setTimeout(connect, delay);
  };

  async function connect() {
    if (stopped) return;
    let token;
    try {
      token = (await api('POST', `/sessions/${seg(sessionId)}/stream-token`)).stream_token;
    } catch (error) {
      if (stopped) return;
      if (error.status === 0 || error.status >= 500) {
        onState({ state: 'reconnecting', error });
        retry();
      } else {
        onState({ state: 'closed', error });
      }
      return;
    }
    if (stopped) return;
    const query = new URLSearchParams({ token });
    if (lastId) query.set('last_event_id', lastId);
    source = new EventSource(`/sessions/${seg(sessionId)}/events?${query}`);
    source.onopen = () => {
      attempt = 0;
      onState({ state: 'live', resumedAfter: drops > 0 && lastSeq >= 0 ? lastSeq : null });
    };
    source.onmessage = (message) => {
      let event;
      try {
        event = JSON.parse(message.data);
      } catch {
        return;
      }
      if (typeof event.seq !== 'number' || event.seq <= lastSeq) return;
      lastSeq = event.seq;
      lastId = event.id;
      if (event.type === 'SESSION_ENDED') ended = true;
      onEvent(event);
    };
    source.onerror = () => {
      // The browser would retry with the same (possibly expired) token: retry ourselves.
      source.close();
      source = null;
      if (stopped) return;
      if (ended) {
        onState({ state: 'ended' });
        return;
      }
      drops += 1;
      onState({ state: 'reconnecting' });
      retry();
    };
  }

  connect();
  return () => {
    stopped = true;
    clearTimeout(timer);
    if (source) source.close();
  };
}
