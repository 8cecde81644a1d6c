/**
 * Server-Sent Events decoding: text chunks split anywhere in, events that
 * carry data out (the HTML standard's rules: `\n`, `\r\n` or `\r` line ends,
 * `data:` lines joined with `\n`, comments and blocks without data skipped).
 *
 * @module
 */

/** One Server-Sent Event with data. */
export interface SseEvent {
  /** The `event:` field, if the block had one. */
  event: string | undefined;
  /** The `data:` lines, joined with `\n`. */
  data: string;
  /** The `id:` field, if the block had one. */
  id: string | undefined;
}

/** Decodes a stream of text chunks into events; `feed` returns the events each chunk completes. An unfinished last block is dropped. */
export class SseDecoder {
  #line = '';
  #afterCr = false;
  #event: string | undefined;
  #data: string[] = [];
  #hasData = false;
  #id: string | undefined;
  #first = true;

  feed(text: string): SseEvent[] {
    if (this.#first && text) {
      this.#first = false;
      if (text.startsWith('\ufeff')) {
        text = text.slice(1);
      }
    }
    const events: SseEvent[] = [];
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const ch = text[i];
      if (ch === '\n' && this.#afterCr) {
        // The \n of a \r\n whose \r ended the line already.
        this.#afterCr = false;
        start = i + 1;
        continue;
      }
      this.#afterCr = false;
      if (ch === '\r' || ch === '\n') {
        this.#line += text.slice(start, i);
        this.#endLine(events);
        this.#line = '';
        this.#afterCr = ch === '\r';
        start = i + 1;
      }
    }
    this.#line += text.slice(start);
    return events;
  }

  #endLine(events: SseEvent[]): void {
    const line = this.#line;
    if (line === '') {
      if (this.#hasData) {
        events.push({ event: this.#event, data: this.#data.join('\n'), id: this.#id });
      }
      this.#event = undefined;
      this.#data = [];
      this.#hasData = false;
      this.#id = undefined;
      return;
    }
    if (line.startsWith(':')) {
      return;
    }
    const colon = line.indexOf(':');
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) {
      value = value.slice(1);
    }
    if (name === 'data') {
      this.#data.push(value);
      this.#hasData = true;
    } else if (name === 'event') {
      this.#event = value;
    } else if (name === 'id' && !value.includes('\0')) {
      this.#id = value;
    }
    // `retry` and unknown fields carry nothing to hand over.
  }
}
