import type { Pool, PoolClient } from "pg";
import { inTransaction, openMigratedPool } from "../db/migratePostgres.js";
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
  `CREATE TABLE IF NOT EXISTS stored_responses (
     id text PRIMARY KEY,
     owner text,
     created_at bigint NOT NULL,
     expires_at bigint NOT NULL,
     response text NOT NULL,
     input text NOT NULL
   );
   CREATE INDEX IF NOT EXISTS stored_responses_expiry ON stored_responses (expires_at);`,
  // The items of each response by id, for `item_reference` inputs (responses stored before have none).
  `CREATE TABLE IF NOT EXISTS stored_response_items (
     item_id text NOT NULL,
     response_id text NOT NULL,
     owner text,
     created_at bigint NOT NULL,
     expires_at bigint NOT NULL,
     item text NOT NULL,
     PRIMARY KEY (item_id, response_id)
   );
   CREATE INDEX IF NOT EXISTS stored_response_items_response ON stored_response_items (response_id);
   CREATE INDEX IF NOT EXISTS stored_response_items_expiry ON stored_response_items (expires_at);`,
];

/** This store's row in `schema_versions`. */
const SCHEMA_COMPONENT = "responses";

/** IS NOT DISTINCT FROM matches NULL with NULL (an unowned response, local profile). */
const OWNED = "id = $1 AND owner IS NOT DISTINCT FROM $2 AND expires_at > $3";

const SQL = {
  insert: `INSERT INTO stored_responses (${RESPONSE_COLUMNS.join(", ")}) VALUES (${RESPONSE_COLUMNS.map((_, i) => `$${i + 1}`).join(", ")})`,
  select: `SELECT * FROM stored_responses WHERE ${OWNED}`,
  remove: `DELETE FROM stored_responses WHERE ${OWNED}`,
  removeExpired: "DELETE FROM stored_responses WHERE expires_at <= $1",
  // All of a response's items in one statement: its columns as parallel arrays, unnested.
  insertItems: `INSERT INTO stored_response_items (${ITEM_COLUMNS.join(", ")})
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[]) ON CONFLICT DO NOTHING`,
  selectItems:
    "SELECT item_id, item FROM stored_response_items WHERE item_id = ANY($1::text[]) AND owner IS NOT DISTINCT FROM $2 AND expires_at > $3 ORDER BY created_at",
  removeItems: "DELETE FROM stored_response_items WHERE response_id = $1",
  removeExpiredItems: "DELETE FROM stored_response_items WHERE expires_at <= $1",
} as const;

/**
 * Stored responses on PostgreSQL, for several replicas: a response stored through one is
 * continued or retrieved through any other. Each statement runs in autocommit, so a resolved
 * promise means committed.
 */
export class PostgresResponseStore implements ResponseStore {
  readonly #pool: Pool;

  private constructor(pool: Pool) {
    this.#pool = pool;
  }

  /** Connects to `url` (postgres://…), bringing the schema up to date. */
  static async connect(url: string): Promise<PostgresResponseStore> {
    return new PostgresResponseStore(await openMigratedPool(url, SCHEMA_COMPONENT, MIGRATIONS));
  }

  async save(record: StoredResponse, items: readonly StoredItem[] = []): Promise<void> {
    const columns = toResponseColumns(record);
    const rows = toItemColumns(record, items);
    const values = RESPONSE_COLUMNS.map((column) => columns[column]);
    if (rows.length === 0) {
      await this.#query("insert", values);
      return;
    }
    await inTransaction(this.#pool, async (client) => {
      await this.#query("insert", values, client);
      await this.#query(
        "insertItems",
        ITEM_COLUMNS.map((column) => rows.map((row) => row[column])),
        client,
      );
    });
  }

  async find(id: string, owner: string | null, now: number): Promise<StoredResponse | undefined> {
    const [row] = (await this.#query("select", [id, owner, now])).rows;
    return row && toStoredResponse(row);
  }

  async findItems(ids: readonly string[], owner: string | null, now: number): Promise<Map<string, object>> {
    if (ids.length === 0) return new Map();
    const { rows } = await this.#pool.query<Pick<ItemColumns, "item_id" | "item">>({
      name: "responses_selectItems",
      text: SQL.selectItems,
      values: [ids, owner, now],
    });
    return toItemMap(rows);
  }

  async delete(id: string, owner: string | null, now: number): Promise<boolean> {
    return inTransaction(this.#pool, async (client) => {
      if (((await this.#query("remove", [id, owner, now], client)).rowCount ?? 0) === 0) return false;
      await this.#query("removeItems", [id], client);
      return true;
    });
  }

  async deleteExpired(now: number): Promise<number> {
    return inTransaction(this.#pool, async (client) => {
      await this.#query("removeExpiredItems", [now], client);
      return (await this.#query("removeExpired", [now], client)).rowCount ?? 0;
    });
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }

  #query(statement: keyof typeof SQL, values: unknown[], client: Pool | PoolClient = this.#pool) {
    return client.query<ResponseColumns>({ name: `responses_${statement}`, text: SQL[statement], values });
  }
}
