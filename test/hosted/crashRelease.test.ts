import { mkdtemp, rm, symlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openHosted, type Hosted } from "../support/hostedServer.js";
import { startServerProcess, type ServerProcess } from "../support/startServerProcess.js";
import { testModelPath } from "../support/testModels.js";
import { freePort } from "../support/freePort.js";

/** Enough requests a minute for the whole test; the day's tokens as in the free tier. */
const tiers = { default: "free", tiers: { free: { requestsPerMinute: 100, tokensPerDay: 150_000 } } };
const CONTEXT_SIZE = 4096;
const IN_FLIGHT = 15;

interface UsageReply {
  limits: { requests_per_minute: { remaining: number }; tokens_per_day: { remaining: number } };
}

// The crash of issue 8 §6: kill -9 with 15 requests generating. Each had reserved its prompt plus
// all the context leaves (4,096 tokens), and before reservations had holders that reservation
// stayed charged until UTC midnight: 61,440 of the day's 150,000 tokens. Restarted on the same
// address, the server releases them at once, charging each its prompt.
describe("a server killed mid-load and restarted", () => {
  let hosted: Hosted;
  let modelsDir: string;
  let token: string;
  let args: string[];
  const servers: ServerProcess[] = [];

  const usage = async (server: ServerProcess): Promise<UsageReply> => {
    const response = await fetch(`${server.url}/v1/usage`, { headers: { authorization: `Bearer ${token}` } });
    expect(response.status).toBe(200);
    return (await response.json()) as UsageReply;
  };
  const chat = (server: ServerProcess, body: object, signal?: AbortSignal) =>
    fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "Tell me a long story." }], ...body }),
      signal,
    });

  beforeAll(async () => {
    hosted = await openHosted({ tiers });
    modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-crash-models-"));
    await symlink(await testModelPath("tiny"), path.join(modelsDir, "tiny.gguf"));
    token = (await hosted.newAccount(undefined, { name: "crash" })).token;
    // One port for both lives of the server: the same instance, as a supervisor restarts it.
    const port = await freePort();
    args = ["--profile", "hosted", "--models-dir", modelsDir, "--data-dir", hosted.dataDir, "--tiers-file", hosted.tiersFile];
    args.push("--port", String(port), "--context-size", String(CONTEXT_SIZE), "--parallel", String(IN_FLIGHT + 1));
  });
  afterAll(async () => {
    for (const server of servers) await server.kill();
    await hosted?.close();
    await rm(modelsDir, { recursive: true, force: true });
  });

  it("gives the day's budget back at once, except the prompts the killed requests had started on", async () => {
    const first = await startServerProcess(args);
    servers.push(first);
    // The prompt's size, from one request that completes.
    const warmUp = (await (await chat(first, { max_tokens: 1 })).json()) as { usage: { prompt_tokens: number; total_tokens: number } };
    const prompt = warmUp.usage.prompt_tokens;
    await expect.poll(async () => (await usage(first)).limits.tokens_per_day.remaining).toBe(150_000 - warmUp.usage.total_tokens);
    const before = 150_000 - warmUp.usage.total_tokens;

    // 15 streams, each reserving prompt + the rest of the context, all generating (a sequence each).
    const abort = new AbortController();
    const streams = await Promise.all(Array.from({ length: IN_FLIGHT }, () => chat(first, { stream: true }, abort.signal)));
    for (const stream of streams) expect(stream.status).toBe(200);
    const loaded = await usage(first);
    expect(loaded.limits.tokens_per_day.remaining).toBe(before - IN_FLIGHT * CONTEXT_SIZE);
    await first.kill();
    abort.abort();

    const restarted = await startServerProcess(args);
    servers.push(restarted);
    const after = await usage(restarted);
    // Released at startup: each killed request is charged its prompt, nothing more.
    expect(after.limits.tokens_per_day.remaining).toBe(before - IN_FLIGHT * prompt);
    // A started request did count: the minute's window still holds all 16.
    expect(after.limits.requests_per_minute.remaining).toBe(100 - 1 - IN_FLIGHT);
    console.log(
      `kill -9 with ${IN_FLIGHT} requests in flight: ${IN_FLIGHT * CONTEXT_SIZE} tokens reserved; ` +
        `after restart ${IN_FLIGHT * prompt} stay charged (${IN_FLIGHT} prompts of ${prompt}); remaining ${after.limits.tokens_per_day.remaining} of 150000`,
    );
    expect(await restarted.stop()).toBe(0);
  });
});
