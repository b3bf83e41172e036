import path from "node:path";
import { AccessGate, type GateLogger } from "../access/AccessGate.js";
import type { AccessStore } from "../access/AccessStore.js";
import { PostgresAccessStore } from "../access/PostgresAccessStore.js";
import type { RateLimiter } from "../access/RateLimiter.js";
import { RedisRateLimiter } from "../access/RedisRateLimiter.js";
import { SqliteAccessStore } from "../access/SqliteAccessStore.js";
import { SqliteRateLimiter } from "../access/SqliteRateLimiter.js";
import { loadTiers, type TiersConfig } from "../access/tiers.js";
import type { Config } from "../config/settings.js";

export const DATABASE_FILE = "modelhost.db";

/** The tiers the configuration names: its tiers file, or the built-in ones. */
export function openTiers(config: Pick<Config, "tiersFile">): Promise<TiersConfig> {
  return loadTiers(config.tiersFile || undefined);
}

/** The store of accounts, tokens and usage the configuration names: PostgreSQL, or SQLite in the data directory. */
export async function openStore(config: Pick<Config, "dataDir" | "databaseUrl">): Promise<AccessStore> {
  return config.databaseUrl ? PostgresAccessStore.connect(config.databaseUrl) : SqliteAccessStore.open(path.join(config.dataDir, DATABASE_FILE));
}

/** The rate limiter the configuration names: Redis, or SQLite in the data directory. */
export async function openLimiter(config: Pick<Config, "dataDir" | "redisUrl">): Promise<RateLimiter> {
  return config.redisUrl ? RedisRateLimiter.connect(config.redisUrl) : SqliteRateLimiter.open(path.join(config.dataDir, DATABASE_FILE));
}

/** The hosted profile's door: the tiers, store and limiter the configuration names, behind one gate. */
export async function openGate(config: Config, logger: GateLogger): Promise<{ gate: AccessGate; close(): Promise<void> }> {
  // The tiers first: a bad tiers file is refused before any connection is made.
  const tiers = await openTiers(config);
  const store = await openStore(config);
  const limiter = await openLimiter(config).catch(async (error: unknown) => {
    await store.close();
    throw error;
  });
  const gate = new AccessGate(store, limiter, tiers, { logger });
  return {
    gate,
    async close() {
      await gate.close();
      await Promise.all([limiter.close(), store.close()]);
    },
  };
}
