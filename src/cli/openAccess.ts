import path from "node:path";
import type { AccessStore } from "../access/AccessStore.js";
import { PostgresAccessStore } from "../access/PostgresAccessStore.js";
import type { RateLimiter } from "../access/RateLimiter.js";
import { RedisRateLimiter } from "../access/RedisRateLimiter.js";
import { SqliteAccessStore } from "../access/SqliteAccessStore.js";
import { SqliteRateLimiter } from "../access/SqliteRateLimiter.js";
import { loadTiers, type TiersConfig } from "../access/tiers.js";
import type { Config } from "../config/settings.js";

export const DATABASE_FILE = "modelhost.db";

type AccessConfig = Pick<Config, "dataDir" | "databaseUrl" | "tiersFile">;

/** The store of accounts, tokens and usage the configuration names: PostgreSQL, or SQLite in the data directory. */
export async function openStore(config: AccessConfig): Promise<{ store: AccessStore; tiers: TiersConfig }> {
  const tiers = await loadTiers(config.tiersFile || undefined);
  const store = config.databaseUrl
    ? await PostgresAccessStore.connect(config.databaseUrl)
    : SqliteAccessStore.open(path.join(config.dataDir, DATABASE_FILE));
  return { store, tiers };
}

/** The rate limiter the configuration names: Redis, or SQLite in the data directory. */
export async function openLimiter(config: Pick<Config, "dataDir" | "redisUrl">): Promise<RateLimiter> {
  return config.redisUrl ? RedisRateLimiter.connect(config.redisUrl) : SqliteRateLimiter.open(path.join(config.dataDir, DATABASE_FILE));
}
