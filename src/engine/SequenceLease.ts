import type { ChatEvent } from "../core/ChatEvent.js";

/**
 * Owns a sequence for the life of one stream and gives it back exactly once: when the stream
 * ends, fails, or is closed by its consumer, even if it was never iterated at all.
 */
export class SequenceLease implements AsyncIterableIterator<ChatEvent> {
  readonly #events: AsyncGenerator<ChatEvent, void, undefined>;
  #release: (() => void) | undefined;

  constructor(events: AsyncGenerator<ChatEvent, void, undefined>, release: () => void) {
    this.#events = events;
    this.#release = release;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<ChatEvent, void>> {
    try {
      const result = await this.#events.next();
      if (result.done) this.#end();
      return result;
    } catch (error) {
      this.#end();
      throw error;
    }
  }

  async return(): Promise<IteratorResult<ChatEvent, void>> {
    try {
      await this.#events.return(undefined);
    } finally {
      this.#end();
    }
    return { done: true, value: undefined };
  }

  #end(): void {
    const release = this.#release;
    this.#release = undefined;
    release?.();
  }
}
