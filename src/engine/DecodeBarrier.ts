/**
 * Lines up the token requests of the sequences generating on one context so that they reach
 * llama.cpp in the same batch.
 *
 * Why: node-llama-cpp samples each sequence's next token on the libuv thread pool, one task per
 * sequence, after the batch is decoded. The sequence whose sample finishes first asks for its next
 * token while the last one's sample is still running, and node-llama-cpp's batch loop, still
 * holding the context, decodes what is queued at once. So with 4 streams, batches held 3 of the 4
 * sequences, in rotation: 171 decode calls for 4×128 tokens instead of 129 (see docs/performance.md).
 *
 * The barrier makes a sequence that wants its next token wait while any other sequence still awaits
 * a token of the current batch; when the last one arrives, all waiting sequences ask together on the
 * next turn of the event loop, after node-llama-cpp's loop has found its queue empty and let go.
 * A sequence whose consumer is slow (a client not reading) simply joins a later batch: it is
 * neither waiting nor awaiting a token, so nobody waits for it.
 */
export class DecodeBarrier {
  /** Sequences past their prompt, in their token loop. */
  #generating = 0;
  /** Sequences whose token request is with node-llama-cpp. */
  #inFlight = 0;
  #waiting: Array<() => void> = [];
  #releaseScheduled = false;

  join(): void {
    this.#generating++;
  }

  leave(): void {
    this.#generating--;
    this.#maybeRelease();
  }

  /** Requests the next token through the barrier. */
  async next<T>(iterator: AsyncIterator<T>): Promise<IteratorResult<T>> {
    // Alone on the context there is nobody to line up with: no extra turn of the event loop.
    if (this.#generating > 1 || this.#waiting.length > 0) {
      await new Promise<void>((resolve) => {
        this.#waiting.push(resolve);
        this.#maybeRelease();
      });
    }
    this.#inFlight++;
    try {
      return await iterator.next();
    } finally {
      this.#inFlight--;
      this.#maybeRelease();
    }
  }

  #maybeRelease(): void {
    if (this.#inFlight > 0 || this.#waiting.length === 0 || this.#releaseScheduled) return;
    this.#releaseScheduled = true;
    setImmediate(() => {
      this.#releaseScheduled = false;
      const released = this.#waiting;
      this.#waiting = [];
      for (const resolve of released) resolve();
    });
  }
}
