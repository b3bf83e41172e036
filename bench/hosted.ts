// node --import tsx bench/hosted.ts [--requests 2000]
//
// What the hosted profile's auth and rate limiting add per request: the same requests to a local
// server and to hosted servers (limiter on SQLite, and on Redis), each its own process. Two
// endpoints: GET /v1/models (token check + a read of the limiter state for the headers) and a
// one-token POST /v1/embeddings (token check + admit + settle + ledger write). Latency one request
// at a time (p50/p99), and throughput with 8 requests in flight.
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { AccessGate } from "../src/access/AccessGate.js";
import { AccessService } from "../src/access/AccessService.js";
import type { RateLimiter } from "../src/access/RateLimiter.js";
import { RedisRateLimiter } from "../src/access/RedisRateLimiter.js";
import { SqliteRateLimiter } from "../src/access/SqliteRateLimiter.js";
import { SqliteAccessStore } from "../src/access/SqliteAccessStore.js";
import { loadTiers } from "../src/access/tiers.js";
import { DATABASE_FILE } from "../src/cli/openAccess.js";
import { startRedis } from "../test/support/startRedis.js";
import { startServerProcess, type ServerProcess } from "../test/support/startServerProcess.js";
import { testModelPath } from "../test/support/testModels.js";
import { percentile } from "./stats.js";

const { values: args } = parseArgs({ options: { requests: { type: "string", default: "2000" } } });
const requests = Number(args.requests);

interface Result {
  p50: number;
  p99: number;
  perSecond: number;
}

/**
 * Latency one request at a time, the servers taking turns request by request so that the
 * machine's drift hits all alike; then throughput with 8 in flight, in alternating blocks.
 */
async function measure(sends: Array<() => Promise<Response>>): Promise<Result[]> {
  const once = async (send: () => Promise<Response>) => {
    const started = performance.now();
    const response = await send();
    await response.arrayBuffer();
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    return performance.now() - started;
  };
  for (const send of sends) for (let i = 0; i < 200; i++) await once(send); // warm up
  const latencies = sends.map(() => [] as number[]);
  for (let i = 0; i < requests; i++) for (const [index, send] of sends.entries()) latencies[index]!.push(await once(send));
  const elapsed = sends.map(() => 0);
  const block = 250;
  for (let done = 0; done < requests; done += block) {
    for (const [index, send] of sends.entries()) {
      const started = performance.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next++ < block) await once(send);
        }),
      );
      elapsed[index]! += performance.now() - started;
    }
  }
  return latencies.map((samples, index) => ({
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    perSecond: (Math.ceil(requests / block) * block * 1000) / elapsed[index]!,
  }));
}

const dataDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-bench-hosted-"));
const modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-bench-models-"));
await symlink(await testModelPath("embed-tiny"), path.join(modelsDir, "embed.gguf"));
const tiersFile = path.join(dataDir, "tiers.json");
await writeFile(tiersFile, JSON.stringify({ tiers: { free: { requestsPerMinute: 10_000_000, tokensPerDay: 1_000_000_000 } } }));
const store = SqliteAccessStore.open(path.join(dataDir, DATABASE_FILE));
const service = new AccessService(store, await loadTiers(tiersFile));
await service.createAccount("bench");
const { secret } = await service.createToken("bench");
await store.close();
const redis = await startRedis();

/** The gate's own cost in process (no HTTP, no other processes): authenticate + admit + settle. */
async function gateCost(limiterName: string, limiter: RateLimiter): Promise<string> {
  const gateStore = SqliteAccessStore.open(path.join(dataDir, DATABASE_FILE));
  const gate = new AccessGate(gateStore, limiter, await loadTiers(tiersFile), { logger: { error: () => {} } });
  const samples: number[] = [];
  for (let i = 0; i < 6000; i++) {
    const started = performance.now();
    const caller = await gate.authenticate(`Bearer ${secret}`);
    const ticket = await gate.admit(caller, "embed", "embeddings", { promptTokens: 3, maxOutputTokens: 0 }, () => {});
    ticket.settle({ promptTokens: 3, completionTokens: 0 });
    if (i >= 1000) samples.push(performance.now() - started);
  }
  await gate.close();
  await limiter.close();
  await gateStore.close();
  return `| ${limiterName} | ${percentile(samples, 50).toFixed(3)} | ${percentile(samples, 99).toFixed(3)} |`;
}
const gateRows = [
  await gateCost("SQLite limiter", SqliteRateLimiter.open(path.join(dataDir, DATABASE_FILE))),
  await gateCost("Redis limiter", await RedisRateLimiter.connect(redis.url)),
];
console.log("\n## The gate in process: authenticate + admit + settle, 5000 requests\n");
console.log("| limiter | p50 ms | p99 ms |");
console.log("| --- | ---: | ---: |");
for (const row of gateRows) console.log(row);

const common = ["--models-dir", modelsDir, "--log-level", "warn"];
const servers: Array<[string, ServerProcess]> = [
  ["local", await startServerProcess(common)],
  [
    "hosted, SQLite limiter",
    await startServerProcess([...common, "--profile", "hosted", "--data-dir", dataDir, "--tiers-file", tiersFile]),
  ],
  [
    "hosted, Redis limiter",
    await startServerProcess([
      ...common,
      "--profile",
      "hosted",
      "--data-dir",
      dataDir,
      "--tiers-file",
      tiersFile,
      "--redis-url",
      redis.url,
    ]),
  ],
];
try {
  const headers = { authorization: `Bearer ${secret}`, "content-type": "application/json" };
  const rows: string[] = [];
  for (const [endpoint, send] of [
    ["GET /v1/models", (url: string) => fetch(`${url}/v1/models`, { headers })],
    [
      "POST /v1/embeddings (1 token)",
      (url: string) => fetch(`${url}/v1/embeddings`, { method: "POST", headers, body: JSON.stringify({ model: "embed", input: [5] }) }),
    ],
  ] as const) {
    const results = await measure(
      servers.map(
        ([, server]) =>
          () =>
            send(server.url),
      ),
    );
    for (const [index, [name]] of servers.entries()) {
      const result = results[index]!;
      const added = result.p50 - results[0]!.p50;
      rows.push(
        `| ${endpoint} | ${name} | ${result.p50.toFixed(3)} | ${result.p99.toFixed(3)} | ${result.perSecond.toFixed(0)} | ${index === 0 ? "" : `${added >= 0 ? "+" : ""}${added.toFixed(3)}`} |`,
      );
    }
  }
  console.log(`\n## Auth + rate limiting per request, ${requests} requests each\n`);
  console.log("| endpoint | server | p50 ms | p99 ms | requests/s (8 in flight) | p50 added vs local, ms |");
  console.log("| --- | --- | ---: | ---: | ---: | ---: |");
  for (const row of rows) console.log(row);
} finally {
  for (const [, server] of servers) await server.stop();
  await redis.stop();
  await rm(dataDir, { recursive: true, force: true });
  await rm(modelsDir, { recursive: true, force: true });
}
