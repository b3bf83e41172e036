// Issue 16, Timeouts: the SSE keepalive comment (every SSE stream, not NDJSON), the generation
// time limit (finish_reason "length"), and the drop of a streaming client that reads nothing.
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeEngine } from "../support/fakeEngine.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

/** A prompt of a few thousand tokens: reading it in batches of 16 takes many decode calls. */
const LONG_PROMPT = "lighthouse keeper ".repeat(120);

describe("SSE keepalive comments", () => {
  let server: TestServer;

  beforeAll(async () => {
    // 1 ms: any pause at all (reading the prompt takes far longer) gets a comment.
    server = await startTestServer({
      models: { tiny: await testModelPath("tiny") },
      config: { streamKeepalive: 1, batchSize: 16, contextSize: 4096 },
    });
  });
  afterAll(async () => server?.close());

  const body = { model: "tiny", messages: [{ role: "user" as const, content: LONG_PROMPT }], max_tokens: 5 };

  it("sends `: keepalive` while a long prompt is read, which the official client skips", async () => {
    const response = await postJson(`${server.url}/v1/chat/completions`, { ...body, stream: true });
    const text = await response.text();
    const blocks = text.split("\n\n").filter(Boolean);
    // While the prompt was read: before the role chunk, which waits for the reply's first event
    // (a reply that opens with a tool call sends its role in the call's own chunk, as OpenAI does).
    expect(blocks[0]).toBe(": keepalive");
    expect(blocks.find((block) => block !== ": keepalive")).toMatch(/^data: .*"role":"assistant"/);
    expect(blocks.filter((block) => block !== ": keepalive").every((block) => block.startsWith("data: "))).toBe(true);
    expect(blocks.at(-1)).toBe("data: [DONE]");

    const stream = await server.client.chat.completions.create({ ...body, stream: true });
    let finish: string | null | undefined;
    for await (const chunk of stream) finish = chunk.choices[0]?.finish_reason ?? finish;
    expect(finish).toBe("length");
  });

  it("sends none on NDJSON streams, where every line stays a JSON object", async () => {
    const response = await postJson(`${server.url}/api/chat`, { ...body, options: { num_predict: 5 } });
    const lines = (await response.text()).split("\n").filter(Boolean);
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ done: true });
  });
});

describe("generation time limit", () => {
  let server: TestServer;

  beforeAll(async () => {
    // 1 ms: over after the first token or the first few (a prompt read from the cache leaves time
    // for more on a fast machine), never near the 500 asked for, which take the tiny model ~100 ms.
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { maxGenerationTime: 1 } });
  });
  afterAll(async () => server?.close());

  it('ends a generation that runs out of time with finish_reason "length" and what it has', async () => {
    const reply = await server.client.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "Write a long story." }],
      max_tokens: 500,
    });
    expect(reply.choices[0]?.finish_reason).toBe("length");
    expect(reply.usage?.completion_tokens).toBeGreaterThanOrEqual(1);
    expect(reply.usage?.completion_tokens).toBeLessThan(500);

    const stream = await server.client.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "Write a long story." }],
      max_tokens: 500,
      stream: true,
    });
    let finish: string | null | undefined;
    for await (const chunk of stream) finish = chunk.choices[0]?.finish_reason ?? finish;
    expect(finish).toBe("length");
  });

  it('says done_reason "length" on the native API', async () => {
    const response = await postJson(`${server.url}/api/chat`, {
      model: "tiny",
      messages: [{ role: "user", content: "Write a long story." }],
      stream: false,
      options: { num_predict: 500 },
    });
    const reply = (await response.json()) as { done: boolean; done_reason: string; eval_count: number };
    expect(reply).toMatchObject({ done: true, done_reason: "length" });
    // "length" with fewer tokens than num_predict: the time limit ended it.
    expect(reply.eval_count).toBeGreaterThanOrEqual(1);
    expect(reply.eval_count).toBeLessThan(500);
  });
});

describe("a streaming client that reads nothing", () => {
  let server: TestServer;

  beforeAll(async () => {
    // The stall limit is the stream writer's, whatever the model: a fake engine writing a reply of
    // 20,000 tokens of 200 characters (some 4 MB of text).
    const reply = { text: Array.from({ length: 20_000 }, () => "x".repeat(200)) };
    server = await startTestServer({
      engine: new FakeEngine({ models: ["tiny"], contextSize: 100_000, reply }),
      config: { streamStallTimeout: 200, maxGenerationTime: 0 },
    });
  });
  afterAll(async () => server?.close());

  it("is dropped once its socket is full, and its decoding slot is freed", async () => {
    const { hostname, port } = new URL(server.url);
    const socket = net.connect({ host: hostname, port: Number(port) });
    socket.on("error", () => undefined);
    await new Promise((resolve) => socket.once("connect", resolve));
    // The reply's chunks, each token with its logprobs, are many times what loopback's socket buffers take.
    const body = JSON.stringify({
      model: "tiny",
      messages: [{ role: "user", content: "Write a very long essay." }],
      max_tokens: 100_000,
      stream: true,
      logprobs: true,
      top_logprobs: 20,
    });
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    // Reads nothing from here on: the kernel's buffers fill, then Node's, then the writer waits.
    socket.pause();
    const active = async () => {
      const health = (await (await fetch(`${server.url}/health`)).json()) as { loaded: { active: number }[] };
      return health.loaded.reduce((sum, model) => sum + model.active, 0);
    };
    await expect.poll(active, { timeout: 20_000 }).toBe(1);
    // Without the stall limit it would hold its slot for as long as it stays connected.
    await expect.poll(active, { timeout: 120_000, interval: 500 }).toBe(0);
    socket.destroy();
    // Freed because it was dropped, not because the reply had ended.
    const generations = (await (await fetch(`${server.url}/metrics`)).text())
      .split("\n")
      .filter((line) => line.startsWith("modelhost_generations_total{"));
    expect(generations).toEqual(['modelhost_generations_total{model="tiny",finish_reason="cancelled"} 1']);
    // Above vitest's 60 s default: the polls' own limits (20 s + 120 s) must run out first.
  }, 180_000);
});
