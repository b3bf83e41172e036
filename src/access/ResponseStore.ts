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
 * Stored responses, apart from the AccessStore (accounts, tokens, usage): one table of their own,
 * in the same database. Implemented on SQLite (the default, in the data directory, in both
 * profiles) and on PostgreSQL (the hosted profile with --database-url). An owner sees only its
 * own responses: a lookup with another owner finds nothing, exactly as an unknown id. Every write
 * is durable when its promise resolves. What is not storage (expiry, purging, the owner rule's
 * callers) lives in ResponseArchive.ts; the row mapping both share, in responseRows.ts.
 */
export interface ResponseStore {
  save(record: StoredResponse): Promise<void>;
  /** The owner's unexpired response with this id. */
  find(id: string, owner: string | null, now: number): Promise<StoredResponse | undefined>;
  /** Deletes the owner's unexpired response with this id; false when there was none. */
  delete(id: string, owner: string | null, now: number): Promise<boolean>;
  /** Deletes every response expired at `now`; returns how many. */
  deleteExpired(now: number): Promise<number>;
  close(): Promise<void>;
}
