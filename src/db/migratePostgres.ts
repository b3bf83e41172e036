import pg from "pg";
import type { Pool, PoolClient } from "pg";

/**
 * Held while migrating, so replicas starting at once take turns: concurrent CREATE TABLE IF NOT
 * EXISTS of the same table can still fail on the catalog's unique index. Any constant will do, as
 * long as nothing else in the database uses it ("mhac"). One lock for every component's schema.
 */
const MIGRATION_LOCK = 0x6d686163;

/**
 * Applies a component's pending migrations in one transaction under an advisory lock: a replica
 * that starts while another migrates waits, then reads the new version and has nothing left to
 * do. The lock is transaction-scoped, so it is released by COMMIT or ROLLBACK, or if the
 * connection dies. Versions are rows of `schema_versions`, one per component, as in SQLite
 * (migrateSqlite.ts).
 */
export async function migratePostgres(pool: Pool, component: string, migrations: readonly string[]): Promise<void> {
  await inTransaction(pool, async (client) => {
    await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
    await client.query("CREATE TABLE IF NOT EXISTS schema_versions (component text PRIMARY KEY, version integer NOT NULL)");
    const result = await client.query<{ version: number }>("SELECT version FROM schema_versions WHERE component = $1", [component]);
    const version = result.rows[0]?.version ?? 0;
    if (version > migrations.length) {
      throw new Error(
        `The database has ${component} schema version ${version}; this modelhost knows up to ${migrations.length}: upgrade modelhost.`,
      );
    }
    for (const [offset, migration] of migrations.slice(version).entries()) {
      await client.query(migration);
      await client.query(
        "INSERT INTO schema_versions (component, version) VALUES ($1, $2) ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version",
        [component, version + offset + 1],
      );
    }
  });
}

/** Runs `work` in one transaction on one pooled connection: committed if it resolves (to its result), rolled back if it throws. */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** A pool for `url` with the component's schema brought up to date; closed again if migrating fails. */
export async function openMigratedPool(url: string, component: string, migrations: readonly string[]): Promise<Pool> {
  const pool = openPool(url);
  try {
    await migratePostgres(pool, component, migrations);
    return pool;
  } catch (error) {
    await pool.end();
    throw error;
  }
}

/**
 * A pool for `url` (postgres://…). An idle pooled connection that breaks (server restart,
 * network) is emitted as 'error', and an unhandled 'error' event would end the process. The pool
 * has already discarded it; the next query opens a new connection or fails with its own error.
 */
function openPool(url: string): Pool {
  const pool = new pg.Pool({ connectionString: url });
  pool.on("error", () => {});
  return pool;
}
