import { execFile } from "node:child_process";
import { mkdtemp, rm, symlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { needs } from "../support/debianPackages.js";
import { openHosted, type Hosted } from "../support/hostedServer.js";
import { startPostgres, type TestPostgres } from "../support/startPostgres.js";
import { startRedis, type RunningRedis } from "../support/startRedis.js";
import { startServerProcess, type ServerProcess } from "../support/startServerProcess.js";
import { testModelPath } from "../support/testModels.js";

const run = promisify(execFile);
const bin = path.resolve(import.meta.dirname, "../../bin/modelhost.cjs");

// Two replicas share PostgreSQL (accounts, tokens, usage) and Redis (rate-limit counters).
describe.skipIf(!needs("postgresql", "redis-server"))("two replicas on PostgreSQL and Redis", () => {
  let postgres: TestPostgres;
  let redis: RunningRedis;
  let hosted: Hosted;
  let modelsDir: string;
  let replicas: ServerProcess[] = [];
  let token: string;

  const chat = (replica: ServerProcess, bearer = token) =>
    fetch(`${replica.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${bearer}` },
      body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "Hi" }], max_tokens: 1 }),
    });

  beforeAll(async () => {
    [postgres, redis] = await Promise.all([startPostgres(), startRedis()]);
    modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-replicas-"));
    await symlink(await testModelPath("tiny"), path.join(modelsDir, "tiny.gguf"));
    hosted = await openHosted({ databaseUrl: postgres.url });
    token = (await hosted.newAccount(undefined, { name: "team" })).token;
    const args = [
      "--profile",
      "hosted",
      "--models-dir",
      modelsDir,
      "--database-url",
      postgres.url,
      "--redis-url",
      redis.url,
      "--log-level",
      "info",
    ];
    replicas = await Promise.all([startServerProcess(args), startServerProcess(args)]);
  });
  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.stop()));
    await hosted?.close();
    await Promise.all([postgres?.stop(), redis?.stop()]);
    await rm(modelsDir, { recursive: true, force: true });
  });

  it("admits exactly 15 of 100 simultaneous requests spread over both replicas", async () => {
    const responses = await Promise.all(Array.from({ length: 100 }, (_, i) => chat(replicas[i % 2]!)));
    const statuses = responses.map((response) => response.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(15);
    expect(statuses.filter((status) => status === 429)).toHaveLength(85);
    // Counted per replica, up to 30 would have been admitted; both replicas answered refusals.
    for (const parity of [0, 1]) expect(statuses.filter((status, i) => i % 2 === parity && status === 429).length).toBeGreaterThan(0);
    await Promise.all(responses.map((response) => response.text()));
  });

  it("records usage from both replicas in the shared ledger", async () => {
    await expect
      .poll(async () => {
        const { stdout } = await run(process.execPath, [bin, "usage", "--account", "team", "--database-url", postgres.url]);
        return Number(/\stiny\s+\S+\s+(\d+)/.exec(stdout)?.[1] ?? 0);
      })
      .toBe(15);
  });

  it("sees a revocation made through the CLI on every replica at once", async () => {
    const { stdout } = await run(process.execPath, [
      bin,
      "token",
      "create",
      "--account",
      "team",
      "--name",
      "short-lived",
      "--database-url",
      postgres.url,
    ]);
    const secret = stdout.trim().split("\n").at(-1)!;
    expect(secret).toMatch(/^mh_[A-Za-z0-9]{38}$/);
    expect((await chat(replicas[0]!, secret)).status).not.toBe(401);
    await run(process.execPath, [bin, "token", "revoke", secret.slice(0, 10), "--database-url", postgres.url]);
    for (const replica of replicas) expect((await chat(replica, secret)).status).toBe(401);
  });

  it("fails closed with 503 when Redis is unreachable, and recovers when it is back", async () => {
    redis.pause();
    try {
      const started = Date.now();
      const responses = await Promise.all(replicas.map((replica) => chat(replica)));
      for (const response of responses) {
        expect(response.status).toBe(503);
        expect(response.headers.get("retry-after")).toBe("1");
        expect(((await response.json()) as { error: { code: string } }).error.code).toBe("limiter_unavailable");
      }
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      redis.resume();
    }
    await expect.poll(async () => (await chat(replicas[0]!)).status, { timeout: 10_000 }).not.toBe(503);
    for (const replica of replicas) expect(replica.output()).not.toContain(token.slice(10));
  });
});
