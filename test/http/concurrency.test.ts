import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

interface Health {
  loaded: Array<{ id: string; active: number; queued: number }>;
}

const messages = [{ role: "user" as const, content: "Write a very long essay." }];

/** The tiny model's decoding and waiting requests, as /health reports them. */
async function slots(server: TestServer): Promise<{ active: number; queued: number }> {
  const health = (await (await fetch(`${server.url}/health`)).json()) as Health;
  const model = health.loaded.find((entry) => entry.id === "tiny");
  return { active: model?.active ?? 0, queued: model?.queued ?? 0 };
}

/** The server learns of a disconnect asynchronously, so counts are polled for, within this bound. */
const SETTLE = { timeout: 5000, interval: 10 };

/** Starts a long streamed generation and resolves once its first content has arrived. */
async function startLongStream(server: TestServer): Promise<AbortController> {
  const controller = new AbortController();
  const response = await postJson(
    `${server.url}/v1/chat/completions`,
    { model: "tiny", messages, max_tokens: 100_000, temperature: 0, stream: true },
    { signal: controller.signal },
  );
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  await reader.read();
  return controller;
}

describe("one sequence, short queue", () => {
  let server: TestServer;
  let client: OpenAI;

  beforeAll(async () => {
    server = await startTestServer({
      models: { tiny: await testModelPath("tiny") },
      config: { parallel: 1, maxQueue: 1, contextSize: 100_000 },
    });
    client = server.client;
  });
  afterAll(() => server?.close());

  it("answers 503 with Retry-After when the queue is full, and serves the queued request later", async () => {
    const running = await startLongStream(server);
    const queued = client.chat.completions.create({ model: "tiny", messages, max_tokens: 4 });
    await expect.poll(() => slots(server), SETTLE).toEqual({ active: 1, queued: 1 });

    const refused = await postJson(`${server.url}/v1/chat/completions`, { model: "tiny", messages, max_tokens: 4 });
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("1");
    const body = (await refused.json()) as { error: { type: string; code: string } };
    expect(body.error).toMatchObject({ type: "server_error", code: "overloaded" });

    const viaClient = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 4 }).catch((e: unknown) => e);
    expect(viaClient).toBeInstanceOf(OpenAI.InternalServerError);
    expect((viaClient as InstanceType<typeof OpenAI.APIError>).status).toBe(503);

    running.abort();
    const reply = await queued;
    expect(reply.usage?.completion_tokens).toBe(4);
    await expect.poll(() => slots(server), SETTLE).toEqual({ active: 0, queued: 0 });
  });

  it("answers 503 overloaded_error in the Messages shape when the queue is full, streamed or not", async () => {
    const running = await startLongStream(server);
    const queued = client.chat.completions.create({ model: "tiny", messages, max_tokens: 4 });
    await expect.poll(() => slots(server), SETTLE).toEqual({ active: 1, queued: 1 });

    const request = { model: "tiny", max_tokens: 4, messages };
    for (const body of [request, { ...request, stream: true }]) {
      const refused = await postJson(`${server.url}/v1/messages`, body);
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe("1");
      expect(await refused.json()).toEqual({
        type: "error",
        error: { type: "overloaded_error", message: expect.stringMatching(/overloaded/) },
        request_id: refused.headers.get("request-id"),
      });
    }
    const anthropic = new Anthropic({ baseURL: server.url, apiKey: "local", maxRetries: 0 });
    const viaSdk = await anthropic.messages.create(request).catch((e: unknown) => e);
    expect(viaSdk).toBeInstanceOf(Anthropic.InternalServerError);
    expect(viaSdk).toMatchObject({ status: 503, error: { error: { type: "overloaded_error" } } });

    running.abort();
    expect((await queued).usage?.completion_tokens).toBe(4);
    await expect.poll(() => slots(server), SETTLE).toEqual({ active: 0, queued: 0 });
  });

  it("frees the sequence of a client that aborts mid-stream, every time (20 rounds)", async () => {
    for (let round = 0; round < 20; round++) {
      const running = await startLongStream(server);
      running.abort();
      // With one sequence, the next request can only be served if the aborted one gave it back.
      const reply = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 2 });
      expect(reply.usage?.completion_tokens).toBe(2);
    }
    await expect.poll(() => slots(server), SETTLE).toEqual({ active: 0, queued: 0 });
  });

  it("aborts through the official client's own signal too", async () => {
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { model: "tiny", messages, max_tokens: 100_000, stream: true },
      { signal: controller.signal },
    );
    let chunks = 0;
    // The client ends the iteration quietly once its signal aborts (after the chunks it had
    // already read from the socket with the third, if any).
    for await (const _chunk of stream) if (++chunks === 3) controller.abort();
    expect(chunks).toBeGreaterThanOrEqual(3);
    await expect.poll(() => slots(server), SETTLE).toEqual({ active: 0, queued: 0 });
  });

  it("stops a non-streamed generation whose client leaves", async () => {
    const controller = new AbortController();
    const pending = postJson(
      `${server.url}/v1/chat/completions`,
      { model: "tiny", messages, max_tokens: 100_000 },
      { signal: controller.signal },
    );
    await expect.poll(() => slots(server), SETTLE).toEqual({ active: 1, queued: 0 });
    controller.abort();
    await expect(pending).rejects.toThrow();
    await expect.poll(() => slots(server), SETTLE).toEqual({ active: 0, queued: 0 });
  });

  it("drops a queued request whose client leaves before it is served", async () => {
    const running = await startLongStream(server);
    const controller = new AbortController();
    const waiting = postJson(
      `${server.url}/v1/chat/completions`,
      { model: "tiny", messages, max_tokens: 4 },
      { signal: controller.signal },
    );
    await expect.poll(() => slots(server), SETTLE).toEqual({ active: 1, queued: 1 });
    controller.abort();
    await expect(waiting).rejects.toThrow();
    await expect.poll(() => slots(server), SETTLE).toEqual({ active: 1, queued: 0 });
    running.abort();
    await expect.poll(() => slots(server), SETTLE).toEqual({ active: 0, queued: 0 });
  });
});
