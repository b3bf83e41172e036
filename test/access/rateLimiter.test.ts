import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Admission, LimitPolicy, RateLimiter, Reservation } from "../../src/access/RateLimiter.js";
import { LIMITER_LUA, LimiterUnavailableError, RedisRateLimiter } from "../../src/access/RedisRateLimiter.js";
import { SqliteRateLimiter } from "../../src/access/SqliteRateLimiter.js";
import { startRedis, type RunningRedis } from "../support/startRedis.js";

const DAY_MS = 86_400_000;

/** One limiter backend as the contract tests drive it. */
interface Backend {
  /** The sliding window's length here. */
  minuteMs: number;
  reservationTtlMs: number;
  /** A limiter on this backend's shared counters; each call is another process or replica. */
  open(): Promise<RateLimiter>;
  /** The limiter's clock now. */
  now(): number;
  /** Lets time pass: the injected clock moves (SQLite), or the test really waits (Redis). */
  advance(ms: number): Promise<void>;
  close(): Promise<void>;
}

let redisServer: RunningRedis;
beforeAll(async () => {
  redisServer = await startRedis();
});
afterAll(async () => {
  await redisServer.stop();
});

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

/** Redis with a one-second "minute" and real waits; a key prefix of its own isolates each test. */
async function redisBackend(): Promise<Backend> {
  const options = { minuteMs: 1_000, reservationTtlMs: 400, keyPrefix: `test:${randomUUID()}:` };
  const limiters: RateLimiter[] = [];
  return {
    ...options,
    async open() {
      const limiter = await RedisRateLimiter.connect(redisServer.url, options);
      limiters.push(limiter);
      return limiter;
    },
    now: () => Date.now(),
    advance: sleep,
    async close() {
      await Promise.all(limiters.map((limiter) => limiter.close()));
    },
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function admitMany(limiters: RateLimiter[], count: number, key: string, policy: LimitPolicy, tokens: number): Promise<Admission[]> {
  return Promise.all(Array.from({ length: count }, (_, i) => limiters[i % limiters.length]!.admit(key, policy, tokens)));
}

function reservationsOf(admissions: Admission[]): Reservation[] {
  return admissions.flatMap((admission) => (admission.allowed ? [admission.reservation] : []));
}

function refusalsOf(admissions: Admission[]) {
  return admissions.flatMap((admission) => (admission.allowed ? [] : [admission]));
}

function admitted(admission: Admission): Reservation {
  if (!admission.allowed) throw new Error(`refused: ${admission.limit}`);
  return admission.reservation;
}

function secondsUntilUtcMidnight(ms: number): number {
  return (DAY_MS - (ms % DAY_MS)) / 1000;
}

describe.each([
  { name: "SQLite", create: () => sqliteBackend() },
  { name: "Redis", create: redisBackend },
])("$name rate limiter", ({ create }) => {
  let backend: Backend;
  let limiter: RateLimiter;
  let key: string;

  beforeEach(async () => {
    backend = await create();
    limiter = await backend.open();
    key = `account-${randomUUID()}`;
  });
  afterEach(async () => {
    await backend.close();
  });

  it("admits exactly the per-minute limit out of 100 concurrent requests", async () => {
    const admissions = await admitMany([limiter], 100, key, { requestsPerMinute: 15 }, 1);

    const reservations = reservationsOf(admissions);
    expect(reservations).toHaveLength(15);
    const remaining = admissions.flatMap((admission) => (admission.allowed ? [admission.state.requests?.remaining] : []));
    expect(remaining.sort((a, b) => a! - b!)).toEqual(Array.from({ length: 15 }, (_, i) => i));
    const refusals = refusalsOf(admissions);
    expect(refusals).toHaveLength(85);
    for (const refusal of refusals) {
      expect(refusal.limit).toBe("requests_per_minute");
      expect(refusal.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      expect(refusal.retryAfterSeconds).toBeLessThanOrEqual(Math.ceil(backend.minuteMs / 1000));
      expect(refusal.state.requests?.remaining).toBe(0);
    }
  });

  it("slides its window: a burst half a window after a full one is refused, one window after it is admitted", async () => {
    const policy = { requestsPerMinute: 5 };
    expect(reservationsOf(await admitMany([limiter], 5, key, policy, 1))).toHaveLength(5);

    // For SQLite this crosses a minute boundary: a fixed window would admit 5 more here.
    await backend.advance(backend.minuteMs / 2);
    const halfway = await admitMany([limiter], 5, key, policy, 1);
    expect(reservationsOf(halfway)).toHaveLength(0);
    for (const refusal of refusalsOf(halfway)) {
      expect(refusal.limit).toBe("requests_per_minute");
      // Until the first burst leaves the window: the other half.
      expect(refusal.retryAfterSeconds).toBe(Math.ceil(backend.minuteMs / 2000));
    }

    await backend.advance(backend.minuteMs * 0.55);
    expect(reservationsOf(await admitMany([limiter], 5, key, policy, 1))).toHaveLength(5);
  });

  it("never reserves more tokens in a day than the budget, whatever the concurrency", async () => {
    const policy = { tokensPerDay: 150_000 };
    const admissions = await admitMany([limiter], 20, key, policy, 10_000);

    const reserved = reservationsOf(admissions).reduce((sum, reservation) => sum + reservation.tokens, 0);
    expect(reserved).toBe(150_000);
    for (const refusal of refusalsOf(admissions)) {
      expect(refusal.limit).toBe("tokens_per_day");
      expect(Math.abs(refusal.retryAfterSeconds - secondsUntilUtcMidnight(backend.now()))).toBeLessThanOrEqual(2);
    }
    expect((await limiter.peek(key, policy)).tokens).toMatchObject({ limit: 150_000, remaining: 0 });
  });

  it("gives back the difference when a request settles for less than it reserved", async () => {
    const policy = { tokensPerDay: 30_000 };
    const [first] = reservationsOf(await admitMany([limiter], 3, key, policy, 10_000));
    expect((await limiter.admit(key, policy, 10_000)).allowed).toBe(false);

    await limiter.settle(first!, 2_000);

    expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(8_000);
    expect((await limiter.admit(key, policy, 8_000)).allowed).toBe(true);
    expect((await limiter.admit(key, policy, 1)).allowed).toBe(false);
  });

  it("settles an aborted request at what it used; settling again, or an unknown reservation, changes nothing", async () => {
    const policy = { tokensPerDay: 100_000 };
    const reservation = admitted(await limiter.admit(key, policy, 40_000));
    expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(60_000);

    await limiter.settle(reservation, 1_234);
    await limiter.settle(reservation, 0);
    await limiter.settle({ ...reservation, id: randomUUID() }, 0);
    expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(100_000 - 1_234);

    // More than reserved counts as the reservation: the day never passes its budget.
    const greedy = admitted(await limiter.admit(key, policy, 1_000));
    await limiter.settle(greedy, 5_000);
    expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(100_000 - 1_234 - 1_000);
  });

  it("holds a concurrency slot from admit to settle", async () => {
    const policy = { concurrentRequests: 3 };
    const admissions = await admitMany([limiter], 10, key, policy, 1);
    const reservations = reservationsOf(admissions);
    expect(reservations).toHaveLength(3);
    for (const refusal of refusalsOf(admissions)) {
      expect(refusal).toMatchObject({ limit: "concurrent_requests", retryAfterSeconds: 1 });
    }

    await limiter.settle(reservations[0]!, 1);
    expect((await limiter.admit(key, policy, 1)).allowed).toBe(true);
    expect((await limiter.admit(key, policy, 1)).allowed).toBe(false);
  });

  it("frees the slot of a reservation never settled (its holder crashed) once it expires", async () => {
    const policy = { concurrentRequests: 1 };
    admitted(await limiter.admit(key, policy, 1));
    expect((await limiter.admit(key, policy, 1)).allowed).toBe(false);

    await backend.advance(backend.reservationTtlMs + 50);
    expect((await limiter.admit(key, policy, 1)).allowed).toBe(true);
  });

  it("counts requests per day, settled or not, until midnight UTC", async () => {
    const policy = { requestsPerDay: 5 };
    for (let i = 0; i < 5; i++) await limiter.settle(admitted(await limiter.admit(key, policy, 1)), 1);

    const refused = await limiter.admit(key, policy, 1);
    expect(refused).toMatchObject({ allowed: false, limit: "requests_per_day" });
    if (refused.allowed) return;
    expect(Math.abs(refused.retryAfterSeconds - secondsUntilUtcMidnight(backend.now()))).toBeLessThanOrEqual(2);
  });

  it("reports the refusal that lasts longest when several limits refuse", async () => {
    const policy = { requestsPerMinute: 1, tokensPerDay: 10, concurrentRequests: 1 };
    admitted(await limiter.admit(key, policy, 10));

    expect(await limiter.admit(key, policy, 1)).toMatchObject({ allowed: false, limit: "tokens_per_day" });
  });

  it("peeks without consuming anything", async () => {
    const policy = { requestsPerMinute: 2, tokensPerDay: 1_000 };
    expect(await limiter.peek(key, policy)).toMatchObject({ requests: { limit: 2, remaining: 2, resetSeconds: 0 }, tokens: { limit: 1_000, remaining: 1_000 } });
    await limiter.peek(key, policy);

    const admission = await limiter.admit(key, policy, 100);
    expect(admission.state).toMatchObject({ requests: { remaining: 1 }, tokens: { remaining: 900 } });
    expect(await limiter.peek(key, policy)).toMatchObject({ requests: { remaining: 1 }, tokens: { remaining: 900 } });
    expect((await limiter.admit(key, policy, 100)).allowed).toBe(true);
  });

  it("omits unlimited dimensions from the state", async () => {
    expect(await limiter.admit(key, {}, 10)).toMatchObject({ allowed: true, state: {} });
    expect(await limiter.peek(key, { requestsPerDay: 10, concurrentRequests: 2 })).toEqual({});
  });

  it("stays exact across two clients of the same counters", async () => {
    const second = await backend.open();
    const admissions = await admitMany([limiter, second], 100, key, { requestsPerMinute: 15 }, 1);

    expect(reservationsOf(admissions)).toHaveLength(15);
    expect(refusalsOf(admissions)).toHaveLength(85);
  });
});

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
      // The start leaves the child time to read its orders, even on a loaded machine.
      const run: Race = { keys: 500, attempts: 5_000, policy: { requestsPerMinute: 3 }, startAt: Date.now() + 200 };
      const childAllowed = child.race(run);
      const allowed = await raceThroughKeys(limiter, run);

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
 * `attempts` admits round-robin over `keys` keys, one at a time, from `startAt` (ms since the
 * epoch): both processes start together and walk the keys in the same order, so they meet on each.
 */
interface Race {
  keys: number;
  attempts: number;
  policy: LimitPolicy;
  startAt: number;
}

async function raceThroughKeys(limiter: RateLimiter, { keys, attempts, policy, startAt }: Race): Promise<number> {
  await sleep(startAt - Date.now());
  let allowed = 0;
  for (let i = 0; i < attempts; i++) {
    if ((await limiter.admit(`shared-${i % keys}`, policy, 1)).allowed) allowed++;
    await new Promise(setImmediate);
  }
  return allowed;
}

/**
 * Another Node process with a limiter on the same file. It opens the file first (tsx takes a
 * moment to start), then `race` sends it the race, which it runs contending with this process for
 * the file's lock, and resolves with how many it was allowed.
 */
async function childAdmitter(file: string): Promise<{ race(run: Race): Promise<number> }> {
  const limiterModule = new URL("../../src/access/SqliteRateLimiter.ts", import.meta.url).href;
  const script = `
    import { once } from "node:events";
    import { SqliteRateLimiter } from ${JSON.stringify(limiterModule)};
    const limiter = SqliteRateLimiter.open(${JSON.stringify(file)});
    console.log("ready");
    const [line] = await once(process.stdin, "data");
    // raceThroughKeys, in the child.
    const { keys, attempts, policy, startAt } = JSON.parse(String(line));
    await new Promise((resolve) => setTimeout(resolve, startAt - Date.now()));
    let allowed = 0;
    for (let i = 0; i < attempts; i++) {
      if ((await limiter.admit(\`shared-\${i % keys}\`, policy, 1)).allowed) allowed++;
      await new Promise(setImmediate);
    }
    await limiter.close();
    console.log(allowed);
    process.exit(0);`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "--eval", script], { stdio: ["pipe", "pipe", "inherit"] });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve, reject) => {
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`child exited with ${code}: ${output}`))));
  });
  const ready = new Promise<void>((resolve) => child.stdout.on("data", () => output.startsWith("ready\n") && resolve()));
  await Promise.race([ready, exited]);
  return {
    async race(run) {
      child.stdin.write(`${JSON.stringify(run)}\n`);
      await exited;
      return Number(output.trim().split("\n")[1]);
    },
  };
}

describe("Redis rate limiter", () => {
  it("names each UTC day's counters by the day, in Redis's clock", async () => {
    const redis = new Redis(redisServer.url);
    try {
      const dayKey = async (ms: number) => redis.eval(`${LIMITER_LUA} return {day_key(ARGV[1], tonumber(ARGV[2])), until_midnight(tonumber(ARGV[2]))}`, 0, "k:day:", ms);
      const midnight = Date.UTC(2030, 0, 2);
      const day = midnight / DAY_MS;
      expect(await dayKey(midnight - 1)).toEqual([`k:day:${day - 1}`, 1]);
      expect(await dayKey(midnight)).toEqual([`k:day:${day}`, DAY_MS]);
      expect(await dayKey(midnight + DAY_MS - 1)).toEqual([`k:day:${day}`, 1]);
    } finally {
      redis.disconnect();
    }
  });

  it("refuses to connect to a Redis that is not there", async () => {
    const server = await startRedis();
    await server.stop();
    await expect(RedisRateLimiter.connect(server.url)).rejects.toBeInstanceOf(LimiterUnavailableError);
  });

  it("fails closed when Redis stalls, and the admits it runs late hold no slot", async () => {
    const server = await startRedis();
    const limiter = await RedisRateLimiter.connect(server.url, { timeoutMs: 300 });
    try {
      const policy = { concurrentRequests: 1 };
      server.pause();
      const started = performance.now();
      await expect(limiter.admit("k", policy, 1)).rejects.toBeInstanceOf(LimiterUnavailableError);
      expect(performance.now() - started).toBeLessThan(1_000);

      // Redis now runs the abandoned admit, then its release.
      server.resume();
      expect(await limiter.admit("k", policy, 1)).toMatchObject({ allowed: true });
    } finally {
      await limiter.close();
      await server.stop();
    }
  });

  it("fails closed within a second when Redis goes down: never admits", async () => {
    const server = await startRedis();
    const limiter = await RedisRateLimiter.connect(server.url);
    try {
      const policy = { requestsPerMinute: 1_000 };
      const reservation = admitted(await limiter.admit("k", policy, 1));

      // Some of these may complete before the server dies; none may be admitted after.
      const during = Promise.allSettled(Array.from({ length: 20 }, () => limiter.admit("k", policy, 1)));
      await server.kill();
      for (const result of await during) {
        if (result.status === "rejected") expect(result.reason).toBeInstanceOf(LimiterUnavailableError);
      }

      const started = performance.now();
      await expect(limiter.admit("k", policy, 1)).rejects.toBeInstanceOf(LimiterUnavailableError);
      await expect(limiter.peek("k", policy)).rejects.toBeInstanceOf(LimiterUnavailableError);
      await expect(limiter.settle(reservation, 1)).rejects.toBeInstanceOf(LimiterUnavailableError);
      expect(performance.now() - started).toBeLessThan(1_000);
    } finally {
      await limiter.close();
      await server.stop();
    }
  });
});
