// Issue 8 §2: streamed requests aborted within a few milliseconds (while queued, while the
// prompt is evaluated, or before the first event is written) must all give their decoding slot
// back. Before the fix, a stream whose client had gone by the time its first event was written
// kept its slot for good.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

const PARALLEL = 4;
const CONCURRENCY = 8;
const REQUESTS = 1000;
/** Aborted while every slot is taken by a long stream, so they are certainly still queued. */
const QUEUED_ABORTS = 64;

interface Slots {
  active: number;
  queued: number;
}

describe("streamed requests aborted quickly, at concurrency beyond --parallel", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { parallel: PARALLEL, maxQueue: 256 } });
  });
  afterAll(() => server?.close());

  const slots = async (): Promise<Slots> => {
    const health = (await (await fetch(`${server.url}/health`)).json()) as { loaded: Array<{ id: string } & Slots> };
    const model = health.loaded.find((entry) => entry.id === "tiny");
    return { active: model?.active ?? 0, queued: model?.queued ?? 0 };
  };

  /** A streamed request read until its client leaves, `afterMs` after sending it (or until it ends). */
  const abortedStream = async (afterMs: number, maxTokens = 8): Promise<void> => {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), afterMs);
    try {
      const body = { model: "tiny", messages: [{ role: "user", content: "Tell me a story." }], max_tokens: maxTokens, stream: true };
      const response = await postJson(`${server.url}/v1/chat/completions`, body, { signal: controller.signal });
      await response.text();
    } catch {
      // aborted before or while the response arrived: what this test is about
    } finally {
      clearTimeout(timer);
    }
  };

  it(`gives every slot back after ${REQUESTS} streams aborted at 0–50 ms, ${QUEUED_ABORTS} of them while queued`, async () => {
    // Loaded first, so the aborts hit decoding rather than model loading.
    const warm = await server.client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 1 });
    expect(warm.choices).toHaveLength(1);

    let next = 0;
    const worker = async () => {
      while (next < REQUESTS) {
        next++;
        await abortedStream(Math.random() * 50);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));

    // Every slot held by a long stream, then requests that can only queue, aborted at 0–50 ms.
    const long = Array.from({ length: PARALLEL }, () => abortedStream(1500, 100_000));
    await expect.poll(slots, { timeout: 5000 }).toMatchObject({ active: PARALLEL });
    let sawQueued = 0;
    await Promise.all(
      Array.from({ length: QUEUED_ABORTS }, async (_, index) => {
        await new Promise((resolve) => setTimeout(resolve, index * 5));
        if ((await slots()).queued > 0) sawQueued++;
        await abortedStream(Math.random() * 50);
      }),
    );
    await Promise.all(long);
    expect(sawQueued).toBeGreaterThan(0);

    await expect.poll(slots, { timeout: 2000, interval: 50 }).toEqual({ active: 0, queued: 0 });
    const reply = await server.client.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
    });
    expect(reply.usage?.completion_tokens).toBe(4);
  }, 180_000);
});
