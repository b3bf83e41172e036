// Issue 16: the shape users deploy, run for real. nginx (Debian's) in front of two replicas of the
// hosted profile, which share PostgreSQL (accounts, tokens, usage) and Redis (limits), all on
// loopback. nginx runs the configuration of docs/deploy.md verbatim, with only its ports changed.
import { mkdtemp, rm, symlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TiersConfig } from "../../src/access/tiers.js";
import { needs } from "../support/debianPackages.js";
import { documentedSite } from "../support/deployDoc.js";
import { freePort } from "../support/freePort.js";
import { openHosted, type Hosted } from "../support/hostedServer.js";
import { startNginx, type RunningNginx } from "../support/startNginx.js";
import { startPostgres, type TestPostgres } from "../support/startPostgres.js";
import { startRedis, type RunningRedis } from "../support/startRedis.js";
import { startServerProcess, type ServerProcess } from "../support/startServerProcess.js";
import { testModelPath } from "../support/testModels.js";

const tiers: TiersConfig = {
  default: "load",
  tiers: { load: { models: {} }, strict: { requestsPerMinute: 15, models: {} } },
};

interface Outcome {
  sentAt: number;
  status: number;
  /** A streamed reply ended with its final event. */
  complete: boolean;
}

describe.skipIf(!needs("nginx", "postgresql", "redis-server"))("nginx in front of two replicas on PostgreSQL and Redis", () => {
  let postgres: TestPostgres;
  let redis: RunningRedis;
  let nginx: RunningNginx;
  let hosted: Hosted;
  let modelsDir: string;
  let replicaArgs: string[];
  let replicaPorts: [number, number];
  const replicas: ServerProcess[] = [];
  let proxyUrl: string;
  let loadToken: string;
  let strictToken: string;

  const startReplica = (index: 0 | 1) => startServerProcess([...replicaArgs, "--port", String(replicaPorts[index])]);

  const post = (base: string, route: string, body: object, token = loadToken, signal?: AbortSignal) =>
    fetch(`${base}${route}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
      signal,
    });

  beforeAll(async () => {
    [postgres, redis] = await Promise.all([startPostgres(), startRedis()]);
    modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-deploy-models-"));
    await symlink(await testModelPath("tiny"), path.join(modelsDir, "tiny.gguf"));
    await symlink(await testModelPath("bench"), path.join(modelsDir, "bench.gguf"));
    hosted = await openHosted({ tiers, databaseUrl: postgres.url });
    loadToken = (await hosted.newAccount(undefined, { name: "load" })).token;
    strictToken = (await hosted.newAccount("strict", { name: "strict" })).token;

    replicaPorts = [await freePort(), await freePort()];
    replicaArgs = [
      "--profile",
      "hosted",
      "--models-dir",
      modelsDir,
      "--database-url",
      postgres.url,
      "--redis-url",
      redis.url,
      "--tiers-file",
      hosted.tiersFile,
      "--parallel",
      "4",
      // Each token written as it is decoded, so the stream test below sees the proxy's buffering alone.
      "--stream-hold",
      "0",
    ];
    replicas.push(await startReplica(0), await startReplica(1));

    const listen = await freePort();
    nginx = await startNginx(documentedSite({ listen, replicas: replicaPorts }), [listen]);
    proxyUrl = `http://127.0.0.1:${listen}`;
  });
  afterAll(async () => {
    await nginx?.stop();
    await Promise.all(replicas.map((replica) => replica.stop()));
    await hosted?.close();
    await Promise.all([postgres?.stop(), redis?.stop()]);
    if (modelsDir) await rm(modelsDir, { recursive: true, force: true });
  });

  it("passes a stream on token by token (X-Accel-Buffering: no)", async () => {
    // The bench model generates a token every ~10 ms on one thread, and the replicas write each as
    // it comes (--stream-hold 0): far enough apart that an unbuffered proxy delivers each in a read
    // of its own, where a buffering one would hold them until 4–8 KB (20–40 chunks) had filled its
    // buffer.
    for (let i = 0; i < 2; i++) {
      // Both replicas load the model first (round robin), so the stream measures generation only.
      await (
        await post(proxyUrl, "/v1/chat/completions", { model: "bench", messages: [{ role: "user", content: "hi" }], max_tokens: 1 })
      ).text();
    }
    const body = {
      model: "bench",
      messages: [{ role: "user", content: "Count to a hundred." }],
      max_tokens: 96,
      temperature: 0,
      stream: true,
    };
    const response = await post(proxyUrl, "/v1/chat/completions", body);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    let reads = 0;
    let text = "";
    const decoder = new TextDecoder();
    for await (const piece of response.body!) {
      reads++;
      text += decoder.decode(piece, { stream: true });
    }
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    const events = text.split("\n\n").filter((block) => block.startsWith("data: {")).length;
    console.log(`stream through nginx: ${events} events in ${reads} reads`);
    expect(events).toBeGreaterThan(64);
    expect(reads).toBeGreaterThanOrEqual(events / 2);
  });

  it("holds a limit exactly across both replicas: 15 of 60 simultaneous requests admitted", async () => {
    const responses = await Promise.all(
      Array.from({ length: 60 }, () =>
        post(proxyUrl, "/v1/chat/completions", { model: "tiny", messages: [{ role: "user", content: "Hi" }], max_tokens: 1 }, strictToken),
      ),
    );
    const statuses = responses.map((response) => response.status);
    await Promise.all(responses.map((response) => response.text()));
    expect(statuses.filter((status) => status === 200)).toHaveLength(15);
    expect(statuses.filter((status) => status === 429)).toHaveLength(45);
    // Both replicas served: each one's access log line count is not visible here, but their /health is.
    for (const port of replicaPorts) {
      const health = (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as { loaded: { id: string }[] };
      expect(health.loaded.map((model) => model.id)).toContain("tiny");
    }
  });

  /** Requests from `workers` loops through nginx until `until` resolves; each outcome recorded. */
  const load = async (workers: number, until: Promise<unknown>, streamed: boolean, outcomes: Outcome[] = []): Promise<Outcome[]> => {
    let done = false;
    void until.finally(() => (done = true));
    const worker = async (id: number) => {
      while (!done) {
        const sentAt = performance.now();
        const body = { model: "tiny", messages: [{ role: "user", content: `Request ${id}` }], max_tokens: 24, stream: streamed };
        try {
          const response = await post(proxyUrl, "/v1/chat/completions", body);
          const text = await response.text();
          outcomes.push({ sentAt, status: response.status, complete: streamed ? text.trimEnd().endsWith("data: [DONE]") : response.ok });
        } catch {
          outcomes.push({ sentAt, status: 0, complete: false });
        }
      }
    };
    await Promise.all(Array.from({ length: workers }, (_, id) => worker(id)));
    return outcomes;
  };

  /** Both replicas have the tiny model loaded (nginx alternates between them). */
  const warmBoth = async () => {
    for (const port of replicaPorts) {
      const response = await post(`http://127.0.0.1:${port}`, "/v1/chat/completions", {
        model: "tiny",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 1,
      });
      expect(response.status).toBe(200);
      await response.text();
    }
  };

  const waitUntilServing = async (port: number) => {
    await expect
      .poll(async () => (await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.status, { timeout: 30_000 })
      .toBe(200);
  };

  /**
   * Until nginx has sent a request to this (restarted) replica. With `max_fails=0` (docs/deploy.md)
   * nginx never marks a replica down, so its next round-robin turn reaches it; seeing a proxied
   * request in its log proves it takes traffic again before the other replica is stopped, so one
   * replica is serving at every moment of the restart.
   */
  const waitUntilProxiedTo = async (replica: ServerProcess) => {
    await waitUntilServing(Number(new URL(replica.url).port));
    await expect.poll(() => /"url":"\/v1\/chat\/completions"/.test(replica.output()), { timeout: 30_000, interval: 100 }).toBe(true);
  };

  it("sends every request that arrives after a replica is killed to the other replica", async () => {
    await warmBoth();
    let killedAt = Infinity;
    const outcomes: Outcome[] = [];
    const scenario = (async () => {
      await expect.poll(() => outcomes.length, { timeout: 60_000 }).toBeGreaterThanOrEqual(20);
      await replicas[0]!.kill();
      // From here on the replica's port refuses connections.
      killedAt = performance.now();
      await expect
        .poll(() => outcomes.filter((outcome) => outcome.sentAt > killedAt).length, { timeout: 60_000 })
        .toBeGreaterThanOrEqual(40);
    })();
    await load(6, scenario, false, outcomes);
    await scenario;
    const after = outcomes.filter((outcome) => outcome.sentAt > killedAt);
    const during = outcomes.filter((outcome) => outcome.sentAt <= killedAt && outcome.status !== 200);
    console.log(
      `replica killed under load: ${outcomes.length} requests, ${after.length} sent after the kill (all must be 200), ${during.length} in flight on it that failed`,
    );
    expect(after.map((outcome) => outcome.status).filter((status) => status !== 200)).toEqual([]);

    replicas[0] = await startReplica(0);
    await waitUntilServing(replicaPorts[0]);
    // Above vitest's 60 s default: the sum of the limits inside (two 60 s polls, a restart of up to
    // 60 s, 30 s until it serves), so a slow step fails with its own message rather than a timeout.
  }, 240_000);

  it("loses no request that had started during a rolling restart (SIGTERM one replica, restart it, then the other)", async () => {
    const exitCodes: (number | null)[] = [];
    const stopMs: number[] = [];
    const outcomes: Outcome[] = [];
    /** Until `count` more requests have been answered: the load runs on both replicas in between. */
    const moreAnswered = async (count: number) => {
      const target = outcomes.length + count;
      await expect.poll(() => outcomes.length, { timeout: 60_000 }).toBeGreaterThanOrEqual(target);
    };
    await warmBoth();
    const scenario = (async () => {
      for (const index of [0, 1] as const) {
        await moreAnswered(10);
        const stopping = performance.now();
        exitCodes.push(await replicas[index]!.stop());
        stopMs.push(Math.round(performance.now() - stopping));
        replicas[index] = await startReplica(index);
        await waitUntilProxiedTo(replicas[index]!);
      }
      await moreAnswered(10);
    })();
    await load(6, scenario, true, outcomes);
    await scenario;
    const lost = outcomes.filter((outcome) => outcome.status !== 200 || !outcome.complete);
    console.log(
      `rolling restart: ${outcomes.length} streamed requests, ${lost.length} lost; replicas exited with ${exitCodes.join(", ")} after ${stopMs.join(", ")} ms`,
    );
    expect(outcomes.length).toBeGreaterThan(20);
    expect(lost).toEqual([]);
    expect(exitCodes).toEqual([0, 0]);
    // The sum of the limits inside: three 60 s polls for answers, and per replica a stop (25 s
    // default grace), a restart (up to 60 s) and 30 s each until it serves and is proxied to.
  }, 480_000);
});
