import type { Database as Connection, Statement } from "better-sqlite3";
import { openSqlite } from "../db/migrateSqlite.js";
import {
  ITEM_COLUMNS,
  RESPONSE_COLUMNS,
  toItemColumns,
  toItemMap,
  toResponseColumns,
  toStoredResponse,
  type ItemColumns,
  type ResponseColumns,
} from "./responseRows.js";
import type { ResponseStore, StoredItem, StoredResponse } from "./ResponseStore.js";

/** Migration n takes the schema from version n to n + 1. Never edit a released one: append a new one. */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE stored_responses (
     id TEXT PRIMARY KEY,
     owner TEXT,
     created_at INTEGER NOT NULL,
     expires_at INTEGER NOT NULL,
     response TEXT NOT NULL,
     input TEXT NOT NULL
   ) STRICT;
   CREATE INDEX stored_responses_expiry ON stored_responses (expires_at);`,
  // The items of each response by id, for `item_reference` inputs (responses stored before have none).
  `CREATE TABLE stored_response_items (
     item_id TEXT NOT NULL,
     response_id TEXT NOT NULL,
     owner TEXT,
     created_at INTEGER NOT NULL,
     expires_at INTEGER NOT NULL,
     item TEXT NOT NULL,
     PRIMARY KEY (item_id, response_id)
   ) STRICT;
   CREATE INDEX stored_response_items_response ON stored_response_items (response_id);
   CREATE INDEX stored_response_items_expiry ON stored_response_items (expires_at);`,
];

/** This store's row in `schema_versions`. */
const SCHEMA_COMPONENT = "responses";

/** As the access store's: writes are one small transaction each, so another connection's lock is short. */
const BUSY_TIMEOUT_MS = 5_000;

/** `IS` matches NULL with NULL: the local profile's responses have no owner. */
const OWNED = "id = @id AND owner IS @owner AND expires_at > @now";

/**
 * Stored responses in SQLite: the default, in the data directory's database beside the access
 * store's tables. WAL, and `synchronous=FULL` as the access store (see access/SqliteAccessStore.ts): a
 * response a client was told is stored must still be there for its next `previous_response_id`.
 */
export class SqliteResponseStore implements ResponseStore {
  readonly #db: Connection;
  readonly #insert: Statement<[ResponseColumns]>;
  readonly #insertItem: Statement<[ItemColumns]>;
  readonly #select: Statement<[{ id: string; owner: string | null; now: number }], ResponseColumns>;
  readonly #selectItems: Statement<[{ ids: string; owner: string | null; now: number }], Pick<ItemColumns, "item_id" | "item">>;
  readonly #remove: Statement<[{ id: string; owner: string | null; now: number }]>;
  readonly #removeItems: Statement<[string]>;
  readonly #removeExpired: Statement<[number]>;
  readonly #removeExpiredItems: Statement<[number]>;

  private constructor(db: Connection) {
    this.#db = db;
    this.#insert = db.prepare(
      `INSERT INTO stored_responses (${RESPONSE_COLUMNS.join(", ")}) VALUES (${RESPONSE_COLUMNS.map((column) => `@${column}`).join(", ")})`,
    );
    this.#insertItem = db.prepare(
      `INSERT OR IGNORE INTO stored_response_items (${ITEM_COLUMNS.join(", ")}) VALUES (${ITEM_COLUMNS.map((column) => `@${column}`).join(", ")})`,
    );
    this.#select = db.prepare(`SELECT * FROM stored_responses WHERE ${OWNED}`);
    // The ids come as one JSON array, so that one prepared statement serves any number of them.
    this.#selectItems = db.prepare(
      "SELECT item_id, item FROM stored_response_items WHERE item_id IN (SELECT value FROM json_each(@ids)) AND owner IS @owner AND expires_at > @now ORDER BY created_at, rowid",
    );
    this.#remove = db.prepare(`DELETE FROM stored_responses WHERE ${OWNED}`);
    this.#removeItems = db.prepare("DELETE FROM stored_response_items WHERE response_id = ?");
    this.#removeExpired = db.prepare("DELETE FROM stored_responses WHERE expires_at <= ?");
    this.#removeExpiredItems = db.prepare("DELETE FROM stored_response_items WHERE expires_at <= ?");
  }

  /** Opens (creating if needed) the store in `file`, bringing its schema up to date. */
  static open(file: string): SqliteResponseStore {
    const options = { component: SCHEMA_COMPONENT, migrations: MIGRATIONS, busyTimeoutMs: BUSY_TIMEOUT_MS, synchronous: "FULL" } as const;
    return openSqlite(file, options, (db) => new SqliteResponseStore(db));
  }

  async save(record: StoredResponse, items: readonly StoredItem[] = []): Promise<void> {
    this.#db.transaction(() => {
      this.#insert.run(toResponseColumns(record));
      for (const row of toItemColumns(record, items)) this.#insertItem.run(row);
    })();
  }

  async find(id: string, owner: string | null, now: number): Promise<StoredResponse | undefined> {
    const row = this.#select.get({ id, owner, now });
    return row && toStoredResponse(row);
  }

  async findItems(ids: readonly string[], owner: string | null, now: number): Promise<Map<string, object>> {
    if (ids.length === 0) return new Map();
    return toItemMap(this.#selectItems.all({ ids: JSON.stringify(ids), owner, now }));
  }

  async delete(id: string, owner: string | null, now: number): Promise<boolean> {
    return this.#db.transaction(() => {
      if (this.#remove.run({ id, owner, now }).changes === 0) return false;
      this.#removeItems.run(id);
      return true;
    })();
  }

  async deleteExpired(now: number): Promise<number> {
    return this.#db.transaction(() => {
      this.#removeExpiredItems.run(now);
      return this.#removeExpired.run(now).changes;
    })();
  }

  async close(): Promise<void> {
    this.#db.close();
  }
}
