import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AccessGate, type Caller } from "../../src/access/AccessGate.js";
import { AccessService } from "../../src/access/AccessService.js";
import { SqliteAccessStore } from "../../src/access/SqliteAccessStore.js";
import { SqliteRateLimiter } from "../../src/access/SqliteRateLimiter.js";
import { defaultTiers } from "../../src/access/tiers.js";
import { ServerError } from "../../src/core/ServerError.js";

// The gate's error model: the limiter being unavailable is a 503 (fail closed); anything else the
// limiter throws is a bug and stays one (a 500 whose log shows it), never disguised as a 503.
describe("AccessGate errors", () => {
  let dir: string;
  let file: string;
  let store: SqliteAccessStore;
  let limiter: SqliteRateLimiter;
  let gate: AccessGate;
  let caller: Caller;
  const logged: string[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-gate-"));
    file = path.join(dir, "modelhost.db");
    store = SqliteAccessStore.open(file);
    limiter = SqliteRateLimiter.open(file);
    gate = new AccessGate(store, limiter, defaultTiers, { logger: { error: (_object, message) => void logged.push(message) } });
    const service = new AccessService(store, defaultTiers);
    await service.createAccount("alice");
    caller = await gate.authenticate(`Bearer ${(await service.createToken("alice")).secret}`);
  });
  afterEach(async () => {
    await gate.close();
    await Promise.all([limiter.close(), store.close()]);
    await rm(dir, { recursive: true, force: true });
  });

  it("lets a programming error through admission as itself, not as limiter_unavailable", async () => {
    // A negative output cap makes a negative reservation: the limiter's RangeError, a bug upstream.
    const admission = gate.admit(caller, "tiny", "chat", { promptTokens: 10, maxOutputTokens: -20 }, () => {});
    await expect(admission).rejects.toBeInstanceOf(RangeError);
    await expect(admission).rejects.not.toBeInstanceOf(ServerError);
  });

  it("answers limiter_unavailable (503) when the limiter's file stays locked", async () => {
    const other = new Database(file);
    other.exec("BEGIN EXCLUSIVE");
    try {
      // The admit waits out the limiter's busy timeout (2 s), then fails closed. (Reading the state
      // still works: in WAL mode a writer's lock blocks no reader.)
      await expect(gate.admit(caller, "tiny", "chat", { promptTokens: 10, maxOutputTokens: 20 }, () => {})).rejects.toMatchObject({
        code: "limiter_unavailable",
        details: { retryAfter: 1 },
      });
      expect(logged).toContain("rate limiter unavailable");
    } finally {
      other.exec("ROLLBACK");
      other.close();
    }
    expect((await gate.state(caller)).tokens).toMatchObject({ limit: 150_000, remaining: 150_000 });
  });
});
