import { SlotPool } from "./SlotPool.js";

/** What the model's activity tracking sees of a LazyContextPool, whatever its kind of context. */
export interface ContextActivity {
  readonly idle: boolean;
  readonly active: number;
  readonly queued: number;
  set onActivity(listener: () => void);
  rejectWaiting(error: unknown): void;
}

/**
 * One context of a kind a model needs only for some requests (embedding, ranking), created on the
 * first request that needs it and then lent to one request at a time, the others waiting in line
 * within the model's queue limit. A creation that fails is retried by the next request.
 */
export class LazyContextPool<T> implements ContextActivity {
  readonly #create: () => Promise<T>;
  readonly #maxQueue: number;
  #creating: Promise<SlotPool<T>> | undefined;
  #pool: SlotPool<T> | undefined;
  #loads = 0;
  #onActivity: () => void = () => {};

  constructor(create: () => Promise<T>, maxQueue: number) {
    this.#create = create;
    this.#maxQueue = maxQueue;
  }

  get idle(): boolean {
    return (this.#pool?.idle ?? true) && this.#loads === 0;
  }

  get active(): number {
    return this.#pool?.active ?? 0;
  }

  get queued(): number {
    return this.#pool?.queued ?? 0;
  }

  set onActivity(listener: () => void) {
    this.#onActivity = listener;
  }

  rejectWaiting(error: unknown): void {
    this.#pool?.rejectWaiting(error);
  }

  /** The pool of the one context, creating the context on first use. */
  pool(): Promise<SlotPool<T>> {
    this.#creating ??= (async () => {
      this.#loads++;
      try {
        const context: T = await this.#create();
        const pool = new SlotPool<T>([context], this.#maxQueue);
        pool.onChange = () => this.#onActivity();
        this.#pool = pool;
        return pool;
      } finally {
        this.#loads--;
      }
    })();
    this.#creating.catch(() => {
      this.#creating = undefined;
    });
    return this.#creating;
  }
}
