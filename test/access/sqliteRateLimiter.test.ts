import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { LimitPolicy, RateLimiter } from "../../src/access/RateLimiter.js";
import { SqliteRateLimiter } from "../../src/access/SqliteRateLimiter.js";
import { admitted, describeRateLimiterContract, type Backend } from "../support/rateLimiterContract.js";

/**
 * SQLite with the default minute on an injected clock, which starts 36 s into a minute: a fixed
 * per-minute window would begin anew 24 s later.
 */
async function sqliteBackend(start = Date.UTC(2030, 0, 1, 12, 0, 36)): Promise<Backend> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-limiter-"));
  let clock = start;
  const limiters: RateLimiter[] = [];
  return {
    minuteMs: 60_000,
    reservationTtlMs: 3_600_000,
    leaseMs: 60_000,
    async open() {
      const limiter = SqliteRateLimiter.open(path.join(dir, "modelhost.db"), { now: () => clock });
      limiters.push(limiter);
      return limiter;
    },
    now: () => clock,
    async advance(ms) {
      clock += ms;
    },
    async close() {
      await Promise.all(limiters.map((limiter) => limiter.close()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

describeRateLimiterContract("SQLite", () => sqliteBackend());

describe("SQLite rate limiter across a UTC midnight", () => {
  let backend: Backend;
  beforeEach(async () => {
    backend = await sqliteBackend(Date.UTC(2030, 0, 1, 23, 59, 59, 500));
  });
  afterEach(async () => {
    await backend.close();
  });

  it("starts a new day's budget at midnight, and settles yesterday's reservation against yesterday", async () => {
    const limiter = await backend.open();
    const policy = { tokensPerDay: 10_000 };
    const yesterdays = admitted(await limiter.admit("k", policy, 10_000));
    expect(await limiter.admit("k", policy, 1)).toMatchObject({ allowed: false, limit: "tokens_per_day", retryAfterSeconds: 1 });

    await backend.advance(1_000);
    const todays = await limiter.admit("k", policy, 10_000);
    expect(todays).toMatchObject({ allowed: true, state: { tokens: { remaining: 0, resetSeconds: 86_399.5 } } });

    await limiter.settle(yesterdays, 0);
    expect((await limiter.peek("k", policy)).tokens?.remaining).toBe(0);
  });
});

describe("SQLite rate limiter upgraded from a file without holders", () => {
  it("releases at start the reservations left by a server of the earlier version, which no holder renews", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-limiter-"));
    const file = path.join(dir, "modelhost.db");
    try {
      // The schema before holders: the reservation and its day's charge, as a server killed then left them.
      const old = new Database(file);
      old.exec(`CREATE TABLE schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL) STRICT;
        INSERT INTO schema_versions VALUES ('rate_limiter', 1);
        CREATE TABLE rate_requests (key TEXT NOT NULL, at INTEGER NOT NULL, id TEXT NOT NULL, PRIMARY KEY (key, at, id)) STRICT, WITHOUT ROWID;
        CREATE TABLE rate_days (key TEXT NOT NULL, day INTEGER NOT NULL, requests INTEGER NOT NULL, tokens INTEGER NOT NULL, PRIMARY KEY (key, day)) STRICT, WITHOUT ROWID;
        CREATE TABLE rate_reservations (key TEXT NOT NULL, id TEXT NOT NULL, day INTEGER NOT NULL, tokens INTEGER NOT NULL, at INTEGER NOT NULL, PRIMARY KEY (key, id)) STRICT, WITHOUT ROWID;`);
      const now = Date.now();
      const day = Math.floor(now / 86_400_000);
      old.prepare("INSERT INTO rate_days VALUES ('k', ?, 1, 4096)").run(day);
      old.prepare("INSERT INTO rate_reservations VALUES ('k', 'r1', ?, 4096, ?)").run(day, now);
      old.close();

      const limiter = SqliteRateLimiter.open(file);
      try {
        // Its prompt is unknown: nothing is charged for it.
        expect((await limiter.peek("k", { tokensPerDay: 10_000 })).tokens?.remaining).toBe(10_000);
        expect(await limiter.admit("k", { concurrentRequests: 1 }, 1)).toMatchObject({ allowed: true });
      } finally {
        await limiter.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("SQLite rate limiter shared by two processes", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-limiter-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("admits exactly the limit when two processes admit into one file at once", async () => {
    // Every key crosses its limit once per test, and only there could a race overshoot it: many keys, many chances.
    const file = path.join(dir, "modelhost.db");
    const limiter = SqliteRateLimiter.open(file);
    try {
      const child = await childAdmitter(file);
      // A handshake, not a wall-clock start, sets them off: the child admits its first, then this
      // process admits its own and lets the child go on. Each is sure of a share however loaded the
      // machine is (a start 200 ms ahead once left the child stalled until this side had taken every
      // key), and from there both walk the same keys at once, ~1 s each.
      const run: Race = { keys: 2_000, attempts: 20_000, policy: { requestsPerMinute: 3 } };
      const childAllowed = child.race(run);
      const allowed = await raceThroughKeys(limiter, run, child.firstAdmitted, child.goOn);

      // Both got a share: their admits really interleaved, each waiting for the other's lock.
      expect(allowed).toBeGreaterThan(0);
      expect(await childAllowed).toBeGreaterThan(0);
      expect(allowed + (await childAllowed)).toBe(run.keys * 3);
    } finally {
      await limiter.close();
    }
  });
});

/**
 * `attempts` admits round-robin over `keys` keys, one at a time: both processes walk the keys in
 * the same order, so they meet on each.
 */
interface Race {
  keys: number;
  attempts: number;
  policy: LimitPolicy;
}

/** This process's side: its first admit waits for the child's first, then lets the child go on. */
async function raceThroughKeys(
  limiter: RateLimiter,
  { keys, attempts, policy }: Race,
  childFirst: Promise<void>,
  letChildGoOn: () => void,
): Promise<number> {
  await childFirst;
  let allowed = 0;
  for (let i = 0; i < attempts; i++) {
    if ((await limiter.admit(`shared-${i % keys}`, policy, 1)).allowed) allowed++;
    if (i === 0) letChildGoOn();
    await new Promise(setImmediate);
  }
  return allowed;
}

/**
 * Another Node process with a limiter on the same file. It opens the file first (tsx takes a
 * moment to start), then `race` sends it the race, which it runs contending with this process for
 * the file's lock, and resolves with how many it was allowed. `firstAdmitted` settles when its first
 * admit is done, and `goOn` lets it past.
 */
async function childAdmitter(file: string): Promise<{ race(run: Race): Promise<number>; firstAdmitted: Promise<void>; goOn(): void }> {
  const limiterModule = new URL("../../src/access/SqliteRateLimiter.ts", import.meta.url).href;
  const script = `
    import { createInterface } from "node:readline";
    import { SqliteRateLimiter } from ${JSON.stringify(limiterModule)};
    const limiter = SqliteRateLimiter.open(${JSON.stringify(file)});
    console.log("ready");
    const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
    // raceThroughKeys, in the child: it admits first, then waits for the parent's first.
    const { keys, attempts, policy } = JSON.parse((await lines.next()).value);
    let allowed = 0;
    for (let i = 0; i < attempts; i++) {
      if ((await limiter.admit(\`shared-\${i % keys}\`, policy, 1)).allowed) allowed++;
      if (i === 0) {
        console.log("first");
        await lines.next();
      }
      await new Promise(setImmediate);
    }
    await limiter.close();
    console.log(allowed);
    process.exit(0);`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "--eval", script], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve, reject) => {
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`child exited with ${code}: ${output}`))));
  });
  const printed = (prefix: string) => {
    const seen = new Promise<void>((resolve) => child.stdout.on("data", () => output.startsWith(prefix) && resolve()));
    return Promise.race([seen, exited.then(() => Promise.reject(new Error(`child exited before printing ${prefix}`)))]);
  };
  await printed("ready\n");
  return {
    async race(run) {
      child.stdin.write(`${JSON.stringify(run)}\n`);
      await exited;
      return Number(output.trim().split("\n")[2]);
    },
    firstAdmitted: printed("ready\nfirst\n"),
    goOn: () => child.stdin.write("go\n"),
  };
}
