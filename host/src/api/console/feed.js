// feed.js: follows the approvals feed (GET /approvals/events, docs/api.md)
// with fetch, since an EventSource cannot send the key. The first frame is
// a snapshot; after a drop it resumes strictly after the last id seen
// (Last-Event-ID), so no entry is applied twice or missed.

import { ApiError, auth } from './api.js';

/**
 * Calls `onSnapshot(items)` with every pending approval (as in GET
 * /approvals), then `onEntry(kind, entry)` for each change in commit order,
 * and `onState({state, error})`: `live`, `reconnecting` or `closed`.
 * Returns a function that stops following.
 */
export function followApprovals(app, { onSnapshot, onEntry, onState }) {
  let lastId = null;
  let stopped = false;
  let controller = null;
  let timer = null;
  let attempt = 0;

  const retry = (error) => {
    if (stopped) return;
    onState({ state: 'reconnecting', error });
    const delay = Math.min(10000, 500 * 2 ** attempt);
    attempt += 1;
    timer = setTimeout(connect, delay);
  };

  const apply = (frame) => {
    let data;
    try {
      data = JSON.parse(frame.data);
    } catch {
      return;
    }
    if (frame.id !== null) lastId = frame.id;
    if (frame.event === 'APPROVALS_SNAPSHOT') onSnapshot(data.items);
    else if (frame.event) onEntry(frame.event, data);
  };

  async function connect() {
    if (stopped) return;
    controller = new AbortController();
    const headers = { Authorization: `Bearer ${auth.key()}`, Accept: 'text/event-stream' };
    if (lastId !== null) headers['Last-Event-ID'] = lastId;
    const query = app ? `?${new URLSearchParams({ app })}` : '';
    let response;
    try {
      response = await fetch(`/approvals/events${query}`, { headers, signal: controller.signal, cache: 'no-store' });
    } catch (error) {
      retry(error);
      return;
    }
    if (!response.ok) {
      const status = response.status;
      if (status >= 500) {
        retry(new ApiError(status, `http_${status}`, `The server answered ${status}.`));
      } else {
        // 400: the id is no longer the feed's; start again from a snapshot.
        if (status === 400 && lastId !== null) {
          lastId = null;
          retry();
          return;
        }
        onState({ state: 'closed', error: new ApiError(status, `http_${status}`, `The server answered ${status}.`) });
      }
      return;
    }
    attempt = 0;
    onState({ state: 'live' });
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const text = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const frame = { id: null, event: null, data: '' };
          for (const line of text.split('\n')) {
            if (line.startsWith('id:')) frame.id = line.slice(3).trim();
            else if (line.startsWith('event:')) frame.event = line.slice(6).trim();
            else if (line.startsWith('data:')) frame.data += line.slice(5).replace(/^ /, '');
          }
          if (frame.data) apply(frame);
        }
      }
    } catch (error) {
      if (stopped) return;
      retry(error);
      return;
    }
    retry();
  }

  connect();
  return () => {
    stopped = true;
    clearTimeout(timer);
    if (controller) controller.abort();
  };
}
