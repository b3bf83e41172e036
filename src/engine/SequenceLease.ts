import type { ChatEvent, ChatStream } from "../core/ChatEvent.js";

/**
 * Owns a sequence for the life of one stream and gives it back exactly once: when the stream
 * ends, fails, or is closed by its consumer, even if it was never iterated at all. When the
 * request's signal aborts it closes itself, so a consumer that left without closing it (a client
 * gone before the first event was written) cannot keep the sequence: at once if no read is in
 * flight, else as soon as that read settles (closing never frees a sequence mid-decode: the
 * generator's own `finally` waits for the running decode step before the release).
 */
export class SequenceLease implements ChatStream {
  readonly #events: AsyncGenerator<ChatEvent, void, undefined>;
  readonly #signal: AbortSignal | undefined;
  #release: (() => void) | undefined;
  #reading = false;
  readonly promptTokens: number | undefined;

  constructor(events: AsyncGenerator<ChatEvent, void, undefined>, release: () => void, signal?: AbortSignal, promptTokens?: number) {
    this.#events = events;
    this.promptTokens = promptTokens;
    this.#release = release;
    this.#signal = signal;
    if (signal?.aborted) this.#close();
    else signal?.addEventListener("abort", this.#onAbort, { once: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<ChatEvent, void>> {
    this.#reading = true;
    try {
      const result = await this.#events.next();
      if (result.done) this.#end();
      return result;
    } catch (error) {
      this.#end();
      throw error;
    } finally {
      this.#reading = false;
      if (this.#signal?.aborted && this.#release) this.#close();
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

  readonly #onAbort = (): void => {
    if (!this.#reading) this.#close();
  };

  /** Closes the stream on behalf of a consumer that is gone; the sequence is released even if closing fails. */
  #close(): void {
    this.return().catch(() => undefined);
  }

  #end(): void {
    this.#signal?.removeEventListener("abort", this.#onAbort);
    const release = this.#release;
    this.#release = undefined;
    release?.();
  }
}
