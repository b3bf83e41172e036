import type { Pool } from "pg";
import { openMigratedPool } from "./migratePostgres.js";
import { RESPONSE_COLUMNS, toResponseColumns, toStoredResponse, type ResponseColumns } from "./responseRows.js";
import type { ResponseStore, StoredResponse } from "./ResponseStore.js";

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
} as const;

/**
 * Stored responses on PostgreSQL, for several replicas: a response stored through one is
 * continued or retrieved through any other. Each statement runs in autocommit, so a resolved
 * promise means committed.
 */
export class PostgresResponseStore implements ResponseStore {
  private readonly pool: Pool;

  private constructor(pool: Pool) {
    this.pool = pool;
  }

  /** Connects to `url` (postgres://…), bringing the schema up to date. */
  static async connect(url: string): Promise<PostgresResponseStore> {
    return new PostgresResponseStore(await openMigratedPool(url, SCHEMA_COMPONENT, MIGRATIONS));
  }

  async save(record: StoredResponse): Promise<void> {
    const columns = toResponseColumns(record);
    await this.query("insert", RESPONSE_COLUMNS.map((column) => columns[column]));
  }

  async find(id: string, owner: string | null, now: number): Promise<StoredResponse | undefined> {
    const [row] = (await this.query("select", [id, owner, now])).rows;
    return row && toStoredResponse(row);
  }

  async delete(id: string, owner: string | null, now: number): Promise<boolean> {
    return ((await this.query("remove", [id, owner, now])).rowCount ?? 0) > 0;
  }

  async deleteExpired(now: number): Promise<number> {
    return (await this.query("removeExpired", [now])).rowCount ?? 0;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  private query(statement: keyof typeof SQL, values: unknown[]) {
    return this.pool.query<ResponseColumns>({ name: `responses_${statement}`, text: SQL[statement], values });
  }
}
