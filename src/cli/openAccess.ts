import path from "node:path";
import { AccessGate, type GateLogger } from "../access/AccessGate.js";
import { AccessService } from "../access/AccessService.js";
import { SignInService } from "../access/SignInService.js";
import type { AccessStore } from "../access/AccessStore.js";
import type { ResponseStore } from "../storedResponses/ResponseStore.js";
import type { RateLimiter } from "../access/RateLimiter.js";
import { SqliteAccessStore } from "../access/SqliteAccessStore.js";
import { SqliteResponseStore } from "../storedResponses/SqliteResponseStore.js";
import { SqliteRateLimiter } from "../access/SqliteRateLimiter.js";
import { loadTiers, type TiersConfig } from "../access/tiers.js";
import type { Config } from "../config/settings.js";

export const DATABASE_FILE = "modelhost.db";

// PostgreSQL and Redis are imported only when the configuration names them: a local server has no
// use for their clients (`pg`, `ioredis`). Without them its V8 heap held 27 MiB at idle against 37
// (three starts each; the resident set moved less than its noise).

/** The tiers the configuration names: its tiers file, or the built-in ones. */
export function openTiers(config: Pick<Config, "tiersFile">): Promise<TiersConfig> {
  return loadTiers(config.tiersFile || undefined);
}

/** The store of accounts, tokens and usage the configuration names: PostgreSQL, or SQLite in the data directory. */
export async function openStore(config: Pick<Config, "dataDir" | "databaseUrl">): Promise<AccessStore> {
  if (!config.databaseUrl) return SqliteAccessStore.open(path.join(config.dataDir, DATABASE_FILE));
  const { PostgresAccessStore } = await import("../access/PostgresAccessStore.js");
  return PostgresAccessStore.connect(config.databaseUrl);
}

/**
 * The store of the Responses API's stored responses: SQLite in the data directory, in both
 * profiles; PostgreSQL in the hosted profile with a database URL (the local profile has no use
 * for one, and a URL left in its environment must not send a user's conversations there).
 */
export async function openResponseStore(config: Pick<Config, "profile" | "dataDir" | "databaseUrl">): Promise<ResponseStore> {
  if (config.profile !== "hosted" || !config.databaseUrl) return SqliteResponseStore.open(path.join(config.dataDir, DATABASE_FILE));
  const { PostgresResponseStore } = await import("../storedResponses/PostgresResponseStore.js");
  return PostgresResponseStore.connect(config.databaseUrl);
}

/** The rate limiter the configuration names: Redis, or SQLite in the data directory. */
async function openLimiter(config: Pick<Config, "dataDir" | "redisUrl">): Promise<RateLimiter> {
  if (!config.redisUrl) return SqliteRateLimiter.open(path.join(config.dataDir, DATABASE_FILE));
  const { RedisRateLimiter } = await import("../access/RedisRateLimiter.js");
  return RedisRateLimiter.connect(config.redisUrl);
}

/** What the hosted profile's server runs on: the gate of its API, and the playground's accounts and sign-in. */
export interface HostedAccess {
  gate: AccessGate;
  accounts: AccessService;
  signIn: SignInService;
  close(): Promise<void>;
}

/**
 * The hosted profile's door: the tiers, store and limiter the configuration names, behind one gate,
 * with the playground's services on the same store. `now` is the clock of expiries (tests move it).
 */
export async function openGate(config: Config, logger: GateLogger, now: () => number = Date.now): Promise<HostedAccess> {
  // The tiers first: a bad tiers file is refused before any connection is made.
  const tiers = await openTiers(config);
  const store = await openStore(config);
  const limiter = await openLimiter(config).catch(async (error: unknown) => {
    await store.close();
    throw error;
  });
  const gate = new AccessGate(store, limiter, tiers, { logger, now });
  return {
    gate,
    accounts: new AccessService(store, tiers, now),
    signIn: new SignInService(store, { idleMs: config.sessionIdleTimeout, maxAgeMs: config.sessionMaxAge }, now),
    async close() {
      await gate.close();
      await Promise.all([limiter.close(), store.close()]);
    },
  };
}
