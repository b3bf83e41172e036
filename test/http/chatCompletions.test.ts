import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readSseEvents, postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

const messages = [{ role: "user" as const, content: "Tell me a story about a lighthouse." }];

describe("POST /v1/chat/completions", () => {
  let server: TestServer;
  let client: OpenAI;

  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") } });
    client = server.client;
  });
  afterAll(() => server?.close());

  it("answers a plain request with the chat.completion shape", async () => {
    const reply = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 24, temperature: 0 });
    expect(reply.id).toMatch(/^chatcmpl-[A-Za-z0-9]{29}$/);
    expect(reply.object).toBe("chat.completion");
    expect(reply.model).toBe("tiny");
    expect(Math.abs(reply.created - Date.now() / 1000)).toBeLessThan(60);
    expect(reply.choices).toHaveLength(1);
    const [choice] = reply.choices;
    expect(choice?.index).toBe(0);
    expect(choice?.message.role).toBe("assistant");
    expect(choice?.message.content?.length).toBeGreaterThan(0);
    expect(["stop", "length"]).toContain(choice?.finish_reason);
    expect(reply.usage?.prompt_tokens).toBeGreaterThan(5);
    expect(reply.usage?.completion_tokens).toBeLessThanOrEqual(24);
    expect(reply.usage?.total_tokens).toBe((reply.usage?.prompt_tokens ?? 0) + (reply.usage?.completion_tokens ?? 0));
  });

  it("streams role first, content deltas, finish_reason last, a usage chunk, then [DONE]", async () => {
    const response = await postJson(`${server.url}/v1/chat/completions`, {
      model: "tiny",
      messages,
      max_tokens: 16,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events = await readSseEvents(response);
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event) as OpenAI.ChatCompletionChunk);
    const ids = new Set(chunks.map((chunk) => chunk.id));
    const created = new Set(chunks.map((chunk) => chunk.created));
    expect(ids.size).toBe(1);
    expect(created.size).toBe(1);
    expect(chunks.every((chunk) => chunk.object === "chat.completion.chunk")).toBe(true);

    const first = chunks[0];
    expect(first?.choices[0]?.delta).toEqual({ role: "assistant", content: "" });
    const usageChunk = chunks.at(-1);
    expect(usageChunk?.choices).toEqual([]);
    expect(usageChunk?.usage).toMatchObject({ completion_tokens: 16 });
    const finish = chunks.at(-2);
    expect(finish?.choices[0]?.finish_reason).toBe("length");
    // Every chunk but the last carries usage: null when include_usage is on.
    expect(chunks.slice(0, -1).every((chunk) => chunk.usage === null)).toBe(true);
    const middle = chunks.slice(1, -2);
    expect(middle.length).toBeGreaterThan(0);
    expect(middle.every((chunk) => chunk.choices[0]?.finish_reason === null && typeof chunk.choices[0]?.delta.content === "string")).toBe(
      true,
    );
  });

  it("streams what it answers unstreamed, at temperature 0 with the same seed", async () => {
    const request = { model: "tiny", messages, max_tokens: 40, temperature: 0, seed: 7 };
    const plain = await client.chat.completions.create(request);
    const stream = await client.chat.completions.create({ ...request, stream: true });
    let streamed = "";
    let finishReason: string | null = null;
    for await (const chunk of stream) {
      streamed += chunk.choices[0]?.delta.content ?? "";
      finishReason = chunk.choices[0]?.finish_reason ?? finishReason;
    }
    expect(streamed).toBe(plain.choices[0]?.message.content);
    expect(finishReason).toBe(plain.choices[0]?.finish_reason);
  });

  it("is deterministic at temperature 0", async () => {
    const request = { model: "tiny", messages, max_tokens: 30, temperature: 0 };
    const [a, b] = await Promise.all([client.chat.completions.create(request), client.chat.completions.create(request)]);
    expect(a.choices[0]?.message.content).toBe(b.choices[0]?.message.content);
  });

  it("ends at a stop sequence without including it, streamed or not", async () => {
    const request = { model: "tiny", messages, max_tokens: 60, temperature: 0 };
    const full = (await client.chat.completions.create(request)).choices[0]?.message.content ?? "";
    // A piece of the text the model will write anyway, so the stop sequence is certain to occur.
    const stop = full.slice(20, 23);
    expect(stop).toHaveLength(3);
    const expected = full.slice(0, full.indexOf(stop));

    const plain = await client.chat.completions.create({ ...request, stop: [stop, "never-generated-ZZZ"] });
    expect(plain.choices[0]?.message.content).toBe(expected);
    expect(plain.choices[0]?.finish_reason).toBe("stop");

    let streamed = "";
    let finishReason: string | null = null;
    for await (const chunk of await client.chat.completions.create({ ...request, stop, stream: true })) {
      streamed += chunk.choices[0]?.delta.content ?? "";
      finishReason = chunk.choices[0]?.finish_reason ?? finishReason;
    }
    expect(streamed).toBe(expected);
    expect(finishReason).toBe("stop");
  });

  it("stops at max_tokens with finish_reason length; max_completion_tokens works the same", async () => {
    const a = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 5, temperature: 0 });
    expect(a.choices[0]?.finish_reason).toBe("length");
    expect(a.usage?.completion_tokens).toBe(5);
    const b = await client.chat.completions.create({ model: "tiny", messages, max_completion_tokens: 3, temperature: 0 });
    expect(b.usage?.completion_tokens).toBe(3);
  });

  it("samples at temperature > 0, reproducibly with a seed", async () => {
    const request = { model: "tiny", messages, max_tokens: 30, temperature: 1.2, top_p: 0.9, seed: 42 };
    const [a, b] = [await client.chat.completions.create(request), await client.chat.completions.create(request)];
    expect(a.choices[0]?.message.content).toBe(b.choices[0]?.message.content);
    const greedy = await client.chat.completions.create({ ...request, temperature: 0 });
    expect(a.choices[0]?.message.content).not.toBe(greedy.choices[0]?.message.content);
  });

  it("applies presence and frequency penalties", async () => {
    const request = { model: "tiny", messages, max_tokens: 40, temperature: 0 };
    const plain = await client.chat.completions.create(request);
    const penalised = await client.chat.completions.create({ ...request, presence_penalty: 2, frequency_penalty: 2 });
    expect(penalised.choices[0]?.message.content).not.toBe(plain.choices[0]?.message.content);
  });

  it("completes 4 parallel requests, each as it would alone", async () => {
    const prompts = ["one", "two", "three", "four"].map((word) => ({
      model: "tiny",
      messages: [{ role: "user" as const, content: `Count to ${word}.` }],
      max_tokens: 32,
      temperature: 0,
    }));
    const alone = [];
    for (const prompt of prompts) alone.push((await client.chat.completions.create(prompt)).choices[0]?.message.content);
    const together = await Promise.all(prompts.map((prompt) => client.chat.completions.create(prompt)));
    expect(together.map((reply) => reply.usage?.completion_tokens)).toEqual(together.map(() => 32));
    expect(together.map((reply) => reply.choices[0]?.message.content)).toEqual(alone);
  });

  it("accepts any bearer value or none: the local profile checks no credentials", async () => {
    const anonymous = await postJson(`${server.url}/v1/chat/completions`, { model: "tiny", messages, max_tokens: 2 });
    expect(anonymous.status).toBe(200);
    const withKey = await postJson(
      `${server.url}/v1/chat/completions`,
      { model: "tiny", messages, max_tokens: 2 },
      { headers: { "content-type": "application/json", authorization: "Bearer whatever" } },
    );
    expect(withKey.status).toBe(200);
  });

  it("reuses the cached start of a conversation, with the same reply as without the cache", async () => {
    const firstTurn = [{ role: "user" as const, content: "Plan a picnic by a lighthouse for six friends." }];
    const first = await client.chat.completions.create({ model: "tiny", messages: firstTurn, max_tokens: 12, temperature: 0 });
    const secondTurn = [
      ...firstTurn,
      { role: "assistant" as const, content: first.choices[0]?.message.content ?? "" },
      { role: "user" as const, content: "Now make it vegetarian." },
    ];
    // Cold: another sequence evaluates the whole conversation (the first turn's sequence is busy).
    const holder = client.chat.completions.create({ model: "tiny", messages: firstTurn, max_tokens: 200, temperature: 0 });
    const cold = await client.chat.completions.create({ model: "tiny", messages: secondTurn, max_tokens: 16, temperature: 0 });
    await holder;
    await client.chat.completions.create({ model: "tiny", messages: firstTurn, max_tokens: 12, temperature: 0 });
    const warm = await client.chat.completions.create({ model: "tiny", messages: secondTurn, max_tokens: 16, temperature: 0 });
    const firstPromptTokens = first.usage?.prompt_tokens ?? 0;
    expect(warm.usage?.prompt_tokens_details?.cached_tokens).toBeGreaterThanOrEqual(firstPromptTokens);
    expect(warm.usage?.prompt_tokens_details?.cached_tokens).toBeLessThan(warm.usage?.prompt_tokens ?? 0);
    expect(cold.usage?.prompt_tokens_details?.cached_tokens).toBeLessThan(firstPromptTokens);
    expect(warm.choices[0]?.message.content).toBe(cold.choices[0]?.message.content);
  });
});
