import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";

/**
 * Applies a component's pending migrations to a SQLite file, each with its version bump in one
 * IMMEDIATE transaction. The version is read inside it, so when several processes (the CLI and the
 * server) open a new file at once, the second waits for the first and then finds nothing left to do.
 *
 * The version is a row of `schema_versions` per component, not `PRAGMA user_version`: the file is
 * shared by the access store, the stored responses and the SQLite rate limiter, and one header
 * field cannot version several schemas.
 */
export function migrateSqlite(db: Database.Database, component: string, migrations: readonly string[]): void {
  const step = db.transaction((): boolean => {
    db.exec("CREATE TABLE IF NOT EXISTS schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL) STRICT");
    const version = sqliteSchemaVersion(db, component);
    if (version > migrations.length) {
      throw new Error(
        `${db.name} has ${component} schema version ${version}; this modelhost knows up to ${migrations.length}: upgrade modelhost.`,
      );
    }
    const migration = migrations[version];
    if (migration === undefined) return false;
    db.exec(migration);
    db.prepare(
      "INSERT INTO schema_versions (component, version) VALUES (?, ?) ON CONFLICT (component) DO UPDATE SET version = excluded.version",
    ).run(component, version + 1);
    return true;
  });
  let applied = true;
  while (applied) applied = step.immediate();
}

function sqliteSchemaVersion(db: Database.Database, component: string): number {
  const row = db.prepare<[string], { version: number }>("SELECT version FROM schema_versions WHERE component = ?").get(component);
  return row?.version ?? 0;
}

export interface SqliteOpenOptions {
  /** This component's row in `schema_versions`, and its migrations. */
  component: string;
  migrations: readonly string[];
  /** How long a write waits for another connection's lock (the CLI beside the server) before SQLITE_BUSY. */
  busyTimeoutMs: number;
  /** Per connection: FULL fsyncs the WAL at each commit (survives power loss), NORMAL at checkpoints. */
  synchronous: "FULL" | "NORMAL";
  foreignKeys?: boolean;
}

/**
 * Opens (creating if needed) a component's SQLite file in WAL mode, brings its schema up to date,
 * and hands the connection to `use`; the connection is closed if any of that fails. The access
 * store, the stored responses and the rate limiter share one file this way.
 */
export function openSqlite<T>(file: string, options: SqliteOpenOptions, use: (db: Database.Database) => T): T {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  // The busy timeout is set first, so that switching the journal mode waits for another connection rather than failing.
  const db = new Database(file, { timeout: options.busyTimeoutMs });
  try {
    db.pragma("journal_mode = WAL");
    db.pragma(`synchronous = ${options.synchronous}`);
    // Off by default in SQLite, per connection.
    if (options.foreignKeys) db.pragma("foreign_keys = ON");
    migrateSqlite(db, options.component, options.migrations);
    return use(db);
  } catch (error) {
    db.close();
    throw error;
  }
}
