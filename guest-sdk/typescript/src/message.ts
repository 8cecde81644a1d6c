/**
 * Streaming assistant messages: {@link Turn.message} opens one,
 * {@link Turn.say} writes a whole one.
 *
 * @module
 */

import * as host from './host.ts';

/**
 * An open assistant message (MESSAGE_START has been written).
 *
 * Each {@link write} is one MESSAGE_DELTA, sent to clients as it is written;
 * {@link finish} sends MESSAGE_END with the full text. A message still open
 * when the handler returns (or throws) is finished by the SDK.
 */
export class Message {
  readonly #id: string;
  #open = true;

  /** @internal Use {@link Turn.message}. */
  constructor(messageId: string) {
    this.#id = messageId;
  }

  /** The message's id, as the host assigned it. */
  get id(): string {
    return this.#id;
  }

  /** Whether the message is still open. */
  get open(): boolean {
    return this.#open;
  }

  /** Appends `text` (one MESSAGE_DELTA; nothing for empty text). */
  write(text: string): void {
    if (text) {
      host.messageDelta(this.#id, text);
    }
  }

  /** Closes the message (MESSAGE_END). Finishing twice does nothing. */
  finish(): void {
    if (this.#open) {
      this.#open = false;
      host.messageEnd(this.#id);
    }
  }

  /** @internal Finishes the message, ignoring a refusal (the turn is over anyway). */
  finishQuietly(): void {
    try {
      this.finish();
    } catch {
      // The host closes what is left open when the turn ends.
    }
  }
}
