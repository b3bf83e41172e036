// Issue 16, soak: 500 streamed requests over every streaming wire format, at concurrency 8 (twice
// --parallel), each client leaving at a random moment (before the answer, while queued, mid-stream)
// or reading to the end. Afterwards no decoding sequence may be left held (/health: 0 active,
// 0 queued), a normal request completes, and the server's memory has not run away.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { peakResidentBytes } from "../support/peakResidentBytes.js";
import { testModelPath } from "../support/testModels.js";

const REQUESTS = 500;
const CONCURRENCY = 8;
const PARALLEL = 4;
/** Peak resident memory allowed to the process running server and clients together. */
const RSS_LIMIT_BYTES = 2 * 1024 ** 3;

const user = { role: "user" as const, content: "Tell me a long story." };

/** One streamed request per wire format; every one holds a decoding slot while it runs. */
const streams: Record<string, { path: string; body: (maxTokens: number) => object }> = {
  "chat completions (SSE)": {
    path: "/v1/chat/completions",
    body: (max) => ({ model: "tiny", messages: [user], max_tokens: max, stream: true }),
  },
  "native chat (NDJSON)": { path: "/api/chat", body: (max) => ({ model: "tiny", messages: [user], options: { num_predict: max } }) },
  "native generate (NDJSON)": {
    path: "/api/generate",
    body: (max) => ({ model: "tiny", prompt: user.content, options: { num_predict: max } }),
  },
  "messages (SSE, named events)": {
    path: "/v1/messages",
    body: (max) => ({ model: "tiny", messages: [user], max_tokens: max, stream: true }),
  },
  "responses (SSE, typed events)": {
    path: "/v1/responses",
    body: (max) => ({ model: "tiny", input: user.content, max_output_tokens: max, stream: true }),
  },
};

interface Slots {
  active: number;
  queued: number;
}

describe("soak: streams aborted at random moments, over every streaming format", () => {
  let server: TestServer;
  let formats: [string, (typeof streams)[string]][];

  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { parallel: PARALLEL, maxQueue: 256 } });
    // Formats whose route this build has (each is its own feature; the soak covers what is served).
    formats = [];
    for (const entry of Object.entries(streams)) {
      const probe = await postJson(`${server.url}${entry[1].path}`, {});
      await probe.text();
      if (probe.status !== 404) formats.push(entry);
    }
  });
  afterAll(() => server?.close());

  const slots = async (): Promise<Slots> => {
    const health = (await (await fetch(`${server.url}/health`)).json()) as { loaded: Array<{ id: string } & Slots> };
    const model = health.loaded.find((entry) => entry.id === "tiny");
    return { active: model?.active ?? 0, queued: model?.queued ?? 0 };
  };

  it(`frees every sequence after ${REQUESTS} streams with random client aborts at concurrency ${CONCURRENCY}`, async () => {
    expect(formats.length).toBeGreaterThanOrEqual(3);
    let next = 0;
    // How each client leaves is chosen up front, so the mix does not depend on the machine's speed:
    // a quarter read to the end; a quarter leave on a timer at 0-50 ms (before the answer, or while
    // queued: they may also finish first); half leave after reading 1-8 body chunks, mid-stream,
    // asking for more tokens than they will ever read.
    const outcome = { aborted: 0, abortedMidStream: 0, completed: 0 };
    const perFormat = new Map<string, number>();
    const worker = async () => {
      while (next < REQUESTS) {
        const index = next++;
        const [name, format] = formats[index % formats.length]!;
        perFormat.set(name, (perFormat.get(name) ?? 0) + 1);
        const plan = index % 4 === 0 ? "read" : index % 4 === 1 ? "timer" : "mid-stream";
        const controller = new AbortController();
        const timer = plan === "timer" ? setTimeout(() => controller.abort(), Math.random() * 50) : undefined;
        const chunksBeforeLeaving = plan === "mid-stream" ? 1 + Math.floor(Math.random() * 8) : Infinity;
        const maxTokens = plan === "read" ? 16 + (index % 5) * 16 : 512;
        try {
          const response = await postJson(`${server.url}${format.path}`, format.body(maxTokens), { signal: controller.signal });
          if (response.status !== 200) throw new Error(`${name}: ${response.status} ${(await response.text()).slice(0, 200)}`);
          const reader = response.body!.getReader();
          for (let chunks = 0; ; chunks++) {
            if (chunks === chunksBeforeLeaving) {
              controller.abort();
              outcome.abortedMidStream++;
            }
            if ((await reader.read()).done) break;
          }
          outcome.completed++;
        } catch (error) {
          if (!controller.signal.aborted) throw error;
          outcome.aborted++;
        } finally {
          clearTimeout(timer);
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));

    const left = await (async () => {
      await expect.poll(slots, { timeout: 5000, interval: 50 }).toEqual({ active: 0, queued: 0 });
      return slots();
    })();
    const peakRss = peakResidentBytes();
    console.log(
      `soak: ${REQUESTS} streams (${[...perFormat].map(([name, count]) => `${name} ${count}`).join(", ")}); ${outcome.aborted} aborted by their client (${outcome.abortedMidStream} mid-stream), ${outcome.completed} read to the end; sequences left held: ${left.active} active, ${left.queued} queued; peak RSS ${(peakRss / 1024 ** 2).toFixed(0)} MiB`,
    );
    expect(outcome.aborted + outcome.completed).toBe(REQUESTS);
    // Every mid-stream leaver left before its stream ended (a reply cut short by the model's own end
    // of turn would be read to the end instead, and not counted here).
    expect(outcome.abortedMidStream).toBeGreaterThan(REQUESTS / 4);
    expect(outcome.aborted).toBeGreaterThanOrEqual(outcome.abortedMidStream);
    expect(peakRss).toBeLessThan(RSS_LIMIT_BYTES);

    const reply = await server.client.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
    });
    expect(reply.usage?.completion_tokens).toBe(4);
  }, 600_000);
});
