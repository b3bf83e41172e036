import type Database from "better-sqlite3";

/**
 * Applies a component's pending migrations to a SQLite file, each with its version bump in one
 * IMMEDIATE transaction. The version is read inside it, so when several processes (the CLI and the
 * server) open a new file at once, the second waits for the first and then finds nothing left to do.
 *
 * The version is a row of `schema_versions` per component, not `PRAGMA user_version`: the file is
 * shared by the access store and the SQLite rate limiter, and one header field cannot version two
 * schemas.
 */
export function migrateSqlite(db: Database.Database, component: string, migrations: readonly string[]): void {
  const step = db.transaction((): boolean => {
    db.exec("CREATE TABLE IF NOT EXISTS schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL) STRICT");
    const version = sqliteSchemaVersion(db, component);
    if (version > migrations.length) {
      throw new Error(`${db.name} has ${component} schema version ${version}; this modelhost knows up to ${migrations.length}: upgrade modelhost.`);
    }
    const migration = migrations[version];
    if (migration === undefined) return false;
    db.exec(migration);
    db.prepare("INSERT INTO schema_versions (component, version) VALUES (?, ?) ON CONFLICT (component) DO UPDATE SET version = excluded.version").run(
      component,
      version + 1,
    );
    return true;
  });
  let applied = true;
  while (applied) applied = step.immediate();
}

function sqliteSchemaVersion(db: Database.Database, component: string): number {
  const row = db.prepare<[string], { version: number }>("SELECT version FROM schema_versions WHERE component = ?").get(component);
  return row?.version ?? 0;
}
