import type { ResponseStore, StoredItem, StoredResponse } from "./ResponseStore.js";

export interface ArchiveLogger {
  error(object: object, message: string): void;
}

/**
 * Expired responses are invisible at once (every lookup compares the expiry); deleting them is
 * housekeeping, done at most this often, after a save: one indexed DELETE per 10 minutes.
 */
const PURGE_INTERVAL_MS = 10 * 60_000;

/**
 * The stored responses of the Responses API, whatever the storage: expiry (`ttlMs` after
 * storing), purging of expired ones, and opening the store on first use, so a server whose
 * clients never store a response never creates the database.
 */
export class ResponseArchive {
  readonly #open: () => Promise<ResponseStore>;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #logger: ArchiveLogger;
  #store: Promise<ResponseStore> | undefined;
  #lastPurge = 0;

  constructor(open: () => Promise<ResponseStore>, options: { ttlMs: number; logger: ArchiveLogger; now?: () => number }) {
    this.#open = open;
    this.#ttlMs = options.ttlMs;
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
  }

  /** Keeps a response and its input until the expiry, and `items` for `findItems` as long. */
  async save(id: string, owner: string | null, response: object, input: object[], items: readonly StoredItem[] = []): Promise<void> {
    const store = await this.#storeOf();
    const now = this.#now();
    await store.save({ id, owner, createdAt: now, expiresAt: now + this.#ttlMs, response, input }, items);
    if (now - this.#lastPurge >= PURGE_INTERVAL_MS) {
      this.#lastPurge = now;
      store.deleteExpired(now).catch((error: unknown) => this.#logger.error({ err: error }, "purging expired responses failed"));
    }
  }

  /** The owner's response with this id; undefined if it is unknown, expired, deleted or another owner's. */
  async find(id: string, owner: string | null): Promise<StoredResponse | undefined> {
    return (await this.#storeOf()).find(id, owner, this.#now());
  }

  /** The owner's kept items with these ids, by id; the unknown, expired, deleted and other owners' are missing. */
  async findItems(ids: readonly string[], owner: string | null): Promise<Map<string, object>> {
    if (ids.length === 0) return new Map();
    return (await this.#storeOf()).findItems(ids, owner, this.#now());
  }

  async delete(id: string, owner: string | null): Promise<boolean> {
    return (await this.#storeOf()).delete(id, owner, this.#now());
  }

  async close(): Promise<void> {
    const store = this.#store;
    this.#store = undefined;
    if (store) await (await store.catch(() => undefined))?.close();
  }

  #storeOf(): Promise<ResponseStore> {
    if (!this.#store) {
      const opening = this.#open();
      this.#store = opening;
      // A store that failed to open is tried again by the next request, not remembered broken.
      opening.catch(() => {
        if (this.#store === opening) this.#store = undefined;
      });
    }
    return this.#store;
  }
}
