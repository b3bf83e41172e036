import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LimiterUnavailableError, type RateLimiter } from "../../src/access/RateLimiter.js";
import { LIMITER_LUA, RedisRateLimiter } from "../../src/access/RedisRateLimiter.js";
import { needs } from "../support/debianPackages.js";
import { admitted, DAY_MS, describeRateLimiterContract, sleep, type Backend } from "../support/rateLimiterContract.js";
import { startRedis, type RunningRedis } from "../support/startRedis.js";

// Without redis-server every test here skips (or fails under CI), and so this hook does not run.
const redisInstalled = needs("redis-server");

let redisServer: RunningRedis;
beforeAll(async () => {
  redisServer = await startRedis();
});
afterAll(async () => {
  await redisServer.stop();
});

/**
 * Redis with a one-second "minute", a one-second lease and real waits (the lease long enough that
 * a loaded machine's timer delays cannot make a live holder look dead); a key prefix of its own
 * isolates each test.
 */
async function redisBackend(): Promise<Backend> {
  const options = { minuteMs: 1_000, reservationTtlMs: 1_500, leaseMs: 1_000, keyPrefix: `test:${randomUUID()}:` };
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

describeRateLimiterContract("Redis", redisBackend, { skip: !redisInstalled });

describe.skipIf(!redisInstalled)("Redis rate limiter", () => {
  it("names each UTC day's counters by the day, in Redis's clock", async () => {
    const redis = new Redis(redisServer.url);
    try {
      const dayKey = async (ms: number) =>
        redis.eval(`${LIMITER_LUA} return {day_key(ARGV[1], tonumber(ARGV[2])), until_midnight(tonumber(ARGV[2]))}`, 0, "k:day:", ms);
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
