import type { AccessStore, UsageRow } from "./AccessStore.js";

type Row = Omit<UsageRow, "accountName">;

/** What the ledger has not written yet. */
export interface LedgerBacklog {
  /** Rows (account, token, model, day) waiting for their flush. */
  pendingRows: number;
  /** ms the oldest unwritten usage has waited (0 when none): USAGE_FLUSH_MS normally, growing while the store fails. */
  lagMs: number;
  /** Flushes that failed (kept for the next one) since start. */
  failedFlushes: number;
}

/** How long usage waits to be written with the rows of other requests (group commit). */
export const USAGE_FLUSH_MS = 20;

/**
 * Gathers the ledger rows of finished requests and writes them together, one transaction (one
 * fsync) per flush instead of one per request: on the SQLite store a per-request fsync blocked the
 * event loop for a third of a millisecond and halved throughput. A row is durable once its flush
 * has committed, at most USAGE_FLUSH_MS after its request ended; a failed flush is retried with the
 * next one.
 */
export class UsageBuffer {
  readonly #store: AccessStore;
  readonly #onError: (error: unknown) => void;
  #pending = new Map<string, Row>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();
  /** performance.now() of the oldest usage not yet committed, including a batch being written. */
  #oldestPending: number | undefined;
  #failedFlushes = 0;

  constructor(store: AccessStore, onError: (error: unknown) => void) {
    this.#store = store;
    this.#onError = onError;
  }

  add(row: Row): void {
    this.#oldestPending ??= performance.now();
    const key = `${row.accountId}\u0000${row.tokenId}\u0000${row.model}\u0000${row.day}`;
    const existing = this.#pending.get(key);
    if (existing) {
      existing.requests += row.requests;
      existing.promptTokens += row.promptTokens;
      existing.completionTokens += row.completionTokens;
    } else {
      this.#pending.set(key, { ...row });
    }
    this.#timer ??= setTimeout(() => void this.flush(), USAGE_FLUSH_MS);
  }

  /** Writes what is pending; resolves once it is committed (or has failed and been kept for the next flush). */
  flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#flushing = this.#flushing.then(() => this.#write());
    return this.#flushing;
  }

  async #write(): Promise<void> {
    if (this.#pending.size === 0) return;
    const batch = this.#pending;
    const oldest = this.#oldestPending;
    this.#pending = new Map();
    try {
      await this.#store.recordUsage([...batch.values()]);
      // Rows added while this batch was written are younger than it: they start the next wait.
      this.#oldestPending = this.#pending.size > 0 ? (this.#oldestPending === oldest ? performance.now() : this.#oldestPending) : undefined;
    } catch (error) {
      this.#failedFlushes++;
      this.#onError(error);
      for (const row of batch.values()) this.add(row);
      this.#oldestPending = oldest;
    }
  }

  backlog(): LedgerBacklog {
    const oldest = this.#oldestPending;
    return {
      pendingRows: this.#pending.size,
      lagMs: oldest === undefined ? 0 : performance.now() - oldest,
      failedFlushes: this.#failedFlushes,
    };
  }
}
