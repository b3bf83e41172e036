import { ServerError } from "../core/ServerError.js";

interface Waiter<T> {
  resolve(item: T): void;
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
  acquire(signal: AbortSignal, rank?: (item: T) => number): Promise<T> {
    signal.throwIfAborted();
    if (this.#free.length > 0) {
      let best = this.#free.length - 1;
      if (rank) {
        let bestScore = -Infinity;
        this.#free.forEach((candidate, index) => {
          const score = rank(candidate);
          if (score > bestScore) [best, bestScore] = [index, score];
        });
      }
      const [item] = this.#free.splice(best, 1) as [T];
      this.#onChange();
      return Promise.resolve(item);
    }
    if (this.#queue.length >= this.#maxQueue) {
      return Promise.reject(
        new ServerError("overloaded", {
          retryAfter: 1,
          message: `The server is overloaded: ${this.#size} requests are decoding and ${this.#queue.length} are waiting. Retry shortly.`,
        }),
      );
    }
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter<T> = {
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
    const next = this.#queue.shift();
    if (next) {
      next.signal.removeEventListener("abort", next.onAbort);
      next.resolve(item);
    } else {
      this.#free.push(item);
    }
    this.#onChange();
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
