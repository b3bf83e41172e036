import { ServerError } from "../core/ServerError.js";

interface Waiter<T> {
  count: number;
  rank: ((item: T) => number) | undefined;
  resolve(items: T[]): void;
  reject(error: unknown): void;
  signal: AbortSignal;
  onAbort(): void;
}

/**
 * A fixed set of slots handed out first come, first served: a model's chat context sequences, or
 * its embedding context. At most `maxQueue` requests wait; a waiter whose client leaves is dropped
 * at once.
 */
export class SlotPool<T> {
  readonly #free: T[];
  readonly #queue: Waiter<T>[] = [];
  readonly #maxQueue: number;
  readonly #size: number;
  #onChange: () => void = () => {};

  constructor(items: readonly T[], maxQueue: number) {
    this.#free = [...items];
    this.#size = items.length;
    this.#maxQueue = maxQueue;
  }

  get active(): number {
    return this.#size - this.#free.length;
  }

  get queued(): number {
    return this.#queue.length;
  }

  get idle(): boolean {
    return this.active === 0 && this.queued === 0;
  }

  /** Called whenever a slot is taken or given back, or a waiter joins or leaves the queue. */
  set onChange(listener: () => void) {
    this.#onChange = listener;
  }

  /**
   * Takes a free item, the one `rank` scores highest when several are free (e.g. the sequence
   * that already holds the longest part of the prompt), or waits for one in FIFO order.
   */
  async acquire(signal: AbortSignal, rank?: (item: T) => number): Promise<T> {
    const [item] = await this.acquireMany(1, signal, rank);
    return item!;
  }

  /**
   * Takes `count` items at once (the sequences of a request with several choices), the first the
   * one `rank` scores highest; waits, in FIFO order with single requests, until that many are
   * free. All at once, so two such requests can never each hold part of what the other needs.
   */
  acquireMany(count: number, signal: AbortSignal, rank?: (item: T) => number): Promise<T[]> {
    signal.throwIfAborted();
    if (count > this.#size) {
      return Promise.reject(
        new ServerError("invalid_request", { message: `${count} slots were asked for at once; there are ${this.#size}.` }),
      );
    }
    if (this.#queue.length === 0 && this.#free.length >= count) {
      const items = this.#take(count, rank);
      this.#onChange();
      return Promise.resolve(items);
    }
    if (this.#queue.length >= this.#maxQueue) {
      return Promise.reject(
        new ServerError("overloaded", {
          retryAfter: 1,
          message: `The server is overloaded: ${this.#size} requests are decoding and ${this.#queue.length} are waiting. Retry shortly.`,
        }),
      );
    }
    return new Promise<T[]>((resolve, reject) => {
      const waiter: Waiter<T> = {
        count,
        rank,
        resolve,
        reject,
        signal,
        onAbort: () => {
          const index = this.#queue.indexOf(waiter);
          if (index !== -1) this.#queue.splice(index, 1);
          reject(signal.reason);
          this.#onChange();
        },
      };
      signal.addEventListener("abort", waiter.onAbort, { once: true });
      this.#queue.push(waiter);
      this.#onChange();
    });
  }

  release(item: T): void {
    this.#free.push(item);
    // The first waiter is served first: one that needs several items holds up those behind it
    // until enough are free, so it is never starved by single requests.
    for (let next = this.#queue[0]; next && next.count <= this.#free.length; next = this.#queue[0]) {
      this.#queue.shift();
      next.signal.removeEventListener("abort", next.onAbort);
      next.resolve(this.#take(next.count, next.rank));
    }
    this.#onChange();
  }

  /** Removes `count` free items, the best ranked first. */
  #take(count: number, rank: ((item: T) => number) | undefined): T[] {
    let best = this.#free.length - 1;
    if (rank) {
      let bestScore = -Infinity;
      this.#free.forEach((candidate, index) => {
        const score = rank(candidate);
        if (score > bestScore) [best, bestScore] = [index, score];
      });
    }
    const [first] = this.#free.splice(best, 1) as [T];
    return [first, ...this.#free.splice(this.#free.length - (count - 1), count - 1)];
  }

  /** Fails every waiter, e.g. when the model is being unloaded. */
  rejectWaiting(error: unknown): void {
    for (const waiter of this.#queue.splice(0)) {
      waiter.signal.removeEventListener("abort", waiter.onAbort);
      waiter.reject(error);
    }
    this.#onChange();
  }
}
