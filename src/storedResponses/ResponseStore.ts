/**
 * A response of the Responses API as kept for `previous_response_id`, retrieval and its input
 * items. The store keeps the JSON the protocol gave it and never looks inside.
 */
export interface StoredResponse {
  /** `resp_…`. */
  id: string;
  /** The account it belongs to in the hosted profile; null in the local profile (one user). */
  owner: string | null;
  /** Milliseconds since the epoch. */
  createdAt: number;
  /** After this (ms since the epoch) it is gone: never returned, and purged. */
  expiresAt: number;
  /** The response object as it was sent. */
  response: object;
  /** Its input items: the conversation it continued, then its own input, each with an id. */
  input: object[];
}

/**
 * One item of a stored response (an input or output item, each with its id), kept apart so that
 * an `item_reference` finds it by id without reading every response of its owner.
 */
export interface StoredItem {
  /** `msg_…`, `fc_…`, `rs_…`, …: the item's own id. */
  id: string;
  /** The item as the protocol wrote it. */
  item: object;
}

/**
 * Stored responses, apart from the AccessStore (accounts, tokens, usage): tables of their own (the
 * responses, and their items by id), in the same database. Implemented on SQLite (the default, in
 * the data directory, in both profiles) and on PostgreSQL (the hosted profile with
 * --database-url). An owner sees only its
 * own responses: a lookup with another owner finds nothing, exactly as an unknown id. Every write
 * is durable when its promise resolves. What is not storage (expiry, purging, the owner rule's
 * callers) lives in ResponseArchive.ts; the row mapping both share, in responseRows.ts.
 */
export interface ResponseStore {
  /** Keeps a response and, beside it in the same transaction, `items` (by default none) for `findItems`. */
  save(record: StoredResponse, items?: readonly StoredItem[]): Promise<void>;
  /** The owner's unexpired response with this id. */
  find(id: string, owner: string | null, now: number): Promise<StoredResponse | undefined>;
  /**
   * The owner's items with these ids, from its unexpired responses, by id; an id that is unknown,
   * expired, deleted or another owner's is missing. When several responses kept an item under
   * one id, the latest one's wins.
   */
  findItems(ids: readonly string[], owner: string | null, now: number): Promise<Map<string, object>>;
  /** Deletes the owner's unexpired response with this id (and its items); false when there was none. */
  delete(id: string, owner: string | null, now: number): Promise<boolean>;
  /** Deletes every response (and its items) expired at `now`; returns how many responses. */
  deleteExpired(now: number): Promise<number>;
  close(): Promise<void>;
}
