// node --import tsx bench/limiter.ts [--iterations 20000] [--keys 100]
//
// What the rate limiter adds to a request: one admit and its settle, back to back, timed together,
// for the SQLite limiter (a file in a temporary directory) and the Redis limiter (a throwaway
// redis-server on loopback). One request at a time, so the figures are latencies, not throughput.
// Keys are visited round-robin under a policy with every dimension limited (none of them refusing),
// so each admit reads a window, a day and the open reservations, as a real one does.
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import type { LimitPolicy, RateLimiter } from "../src/access/RateLimiter.js";
import { RedisRateLimiter } from "../src/access/RedisRateLimiter.js";
import { SqliteRateLimiter } from "../src/access/SqliteRateLimiter.js";
import { startRedis } from "../test/support/startRedis.js";
import { percentile } from "./stats.js";

const { values: args } = parseArgs({
  options: {
    iterations: { type: "string", default: "20000" },
    keys: { type: "string", default: "100" },
  },
});
const iterations = Number(args.iterations);
const keys = Number(args.keys);
const warmUp = Math.min(2_000, iterations);
const policy: LimitPolicy = {
  requestsPerMinute: 1_000_000,
  requestsPerDay: 1_000_000_000,
  tokensPerDay: 1_000_000_000_000,
  concurrentRequests: 64,
};

interface Samples {
  /** ms of each admit alone: what a request waits for before it starts (the server settles without waiting). */
  admit: number[];
  /** ms of each admit and its settle. */
  pair: number[];
}

async function timeAdmitAndSettle(limiter: RateLimiter): Promise<Samples> {
  const samples: Samples = { admit: [], pair: [] };
  for (let i = 0; i < warmUp + iterations; i++) {
    const started = performance.now();
    const admission = await limiter.admit(`account-${i % keys}`, policy, 1_000);
    const admitted = performance.now();
    if (!admission.allowed) throw new Error(`refused: ${admission.limit}`);
    await limiter.settle(admission.reservation, 400);
    if (i < warmUp) continue;
    samples.admit.push(admitted - started);
    samples.pair.push(performance.now() - started);
  }
  return samples;
}

function report(name: string, samples: Samples): void {
  const ms = (values: number[], p: number) => percentile(values, p).toFixed(3);
  console.log(
    `${name.padEnd(7)} admit+settle p50 ${ms(samples.pair, 50)} ms  p99 ${ms(samples.pair, 99)} ms   ` +
      `admit alone p50 ${ms(samples.admit, 50)} ms  p99 ${ms(samples.admit, 99)} ms`,
  );
}

console.log(`admit + settle, ${iterations} iterations over ${keys} keys (after ${warmUp} warm-up)`);

const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-bench-limiter-"));
const sqlite = SqliteRateLimiter.open(path.join(dir, "modelhost.db"));
try {
  report("sqlite", await timeAdmitAndSettle(sqlite));
} finally {
  await sqlite.close();
  await rm(dir, { recursive: true, force: true });
}

const server = await startRedis();
const redis = await RedisRateLimiter.connect(server.url);
try {
  report("redis", await timeAdmitAndSettle(redis));
} finally {
  await redis.close();
  await server.stop();
}
