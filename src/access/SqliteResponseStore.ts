import type { Database as Connection, Statement } from "better-sqlite3";
import { openSqlite } from "./migrateSqlite.js";
import { RESPONSE_COLUMNS, toResponseColumns, toStoredResponse, type ResponseColumns } from "./responseRows.js";
import type { ResponseStore, StoredResponse } from "./ResponseStore.js";

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
];

/** This store's row in `schema_versions`. */
const SCHEMA_COMPONENT = "responses";

/** As the access store's: writes are one small transaction each, so another connection's lock is short. */
const BUSY_TIMEOUT_MS = 5_000;

/** `IS` matches NULL with NULL: the local profile's responses have no owner. */
const OWNED = "id = @id AND owner IS @owner AND expires_at > @now";

/**
 * Stored responses in SQLite: the default, in the data directory's database beside the access
 * store's tables. WAL, and `synchronous=FULL` as the access store (see SqliteAccessStore.ts): a
 * response a client was told is stored must still be there for its next `previous_response_id`.
 */
export class SqliteResponseStore implements ResponseStore {
  private readonly db: Connection;
  private readonly insert: Statement<[ResponseColumns]>;
  private readonly select: Statement<[{ id: string; owner: string | null; now: number }], ResponseColumns>;
  private readonly remove: Statement<[{ id: string; owner: string | null; now: number }]>;
  private readonly removeExpired: Statement<[number]>;

  private constructor(db: Connection) {
    this.db = db;
    this.insert = db.prepare(`INSERT INTO stored_responses (${RESPONSE_COLUMNS.join(", ")}) VALUES (${RESPONSE_COLUMNS.map((column) => `@${column}`).join(", ")})`);
    this.select = db.prepare(`SELECT * FROM stored_responses WHERE ${OWNED}`);
    this.remove = db.prepare(`DELETE FROM stored_responses WHERE ${OWNED}`);
    this.removeExpired = db.prepare("DELETE FROM stored_responses WHERE expires_at <= ?");
  }

  /** Opens (creating if needed) the store in `file`, bringing its schema up to date. */
  static open(file: string): SqliteResponseStore {
    const options = { component: SCHEMA_COMPONENT, migrations: MIGRATIONS, busyTimeoutMs: BUSY_TIMEOUT_MS, synchronous: "FULL" } as const;
    return openSqlite(file, options, (db) => new SqliteResponseStore(db));
  }

  async save(record: StoredResponse): Promise<void> {
    this.insert.run(toResponseColumns(record));
  }

  async find(id: string, owner: string | null, now: number): Promise<StoredResponse | undefined> {
    const row = this.select.get({ id, owner, now });
    return row && toStoredResponse(row);
  }

  async delete(id: string, owner: string | null, now: number): Promise<boolean> {
    return this.remove.run({ id, owner, now }).changes > 0;
  }

  async deleteExpired(now: number): Promise<number> {
    return this.removeExpired.run(now).changes;
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
