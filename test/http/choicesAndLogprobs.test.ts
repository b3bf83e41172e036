import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EngineCounters } from "../../src/core/ModelInfo.js";
import { readSseEvents, postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

const messages = [{ role: "user" as const, content: "Tell me a story about a lighthouse." }];

describe("chat completions: logprobs and n", () => {
  let server: TestServer;
  let client: OpenAI;
  beforeAll(async () => ({ client } = server = await startTestServer({ models: { tiny: await testModelPath("tiny") } })));
  afterAll(() => server?.close());

  async function counters(): Promise<EngineCounters> {
    const health = (await (await fetch(`${server.url}/health`)).json()) as { counters: EngineCounters };
    return health.counters;
  }

  it("at temperature 0 the chosen token is the most likely; top-k probabilities sum to at most 1; bytes rebuild the content", async () => {
    const reply = await client.chat.completions.create({
      model: "tiny",
      messages,
      max_tokens: 24,
      temperature: 0,
      logprobs: true,
      top_logprobs: 5,
    });
    const choice = reply.choices[0]!;
    const content = choice.logprobs?.content ?? [];
    expect(content).toHaveLength(reply.usage!.completion_tokens);
    for (const entry of content) {
      expect(entry.top_logprobs).toHaveLength(5);
      const best = Math.max(...entry.top_logprobs.map((top) => top.logprob));
      expect(entry.logprob).toBe(best);
      expect(entry.top_logprobs[0]?.token).toBe(entry.token);
      expect(entry.logprob).toBeLessThanOrEqual(0);
      const mass = entry.top_logprobs.reduce((sum, top) => sum + Math.exp(top.logprob), 0);
      expect(mass).toBeLessThanOrEqual(1 + 1e-6);
      // Best first.
      const ordered = entry.top_logprobs.map((top) => top.logprob);
      expect(ordered).toEqual([...ordered].sort((a, b) => b - a));
    }
    const bytes = Buffer.from(content.flatMap((entry) => entry.bytes ?? []));
    expect(bytes.toString("utf8")).toBe(choice.message.content);
  });

  it("gives only the chosen token's logprob without top_logprobs, and null logprobs when not asked", async () => {
    const reply = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 8, temperature: 0, logprobs: true });
    for (const entry of reply.choices[0]!.logprobs!.content!) {
      expect(entry.top_logprobs).toEqual([]);
      expect(entry.logprob).toBeLessThanOrEqual(0);
    }
    const plain = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 8, temperature: 0 });
    expect(plain.choices[0]!.logprobs).toBeNull();
    expect(plain.choices[0]!.message.content).toBe(reply.choices[0]!.message.content);
  });

  it("streams the same logprobs as the plain reply, in the content chunks", async () => {
    const body = { model: "tiny", messages, max_tokens: 20, temperature: 0.8, seed: 7, logprobs: true, top_logprobs: 3 };
    const plain = await client.chat.completions.create(body);
    const events = await readSseEvents(await postJson(`${server.url}/v1/chat/completions`, { ...body, stream: true }));
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event) as OpenAI.ChatCompletionChunk);
    const streamed = chunks.flatMap((chunk) => chunk.choices.flatMap((choice) => choice.logprobs?.content ?? []));
    const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("");
    expect(text).toBe(plain.choices[0]!.message.content);
    expect(streamed).toEqual(plain.choices[0]!.logprobs!.content);
  });

  it("n at temperature 0: n identical choices, each the n=1 reply; usage counts the prompt once", async () => {
    const one = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 16, temperature: 0 });
    const four = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 16, temperature: 0, n: 4 });
    expect(four.choices.map((choice) => choice.index)).toEqual([0, 1, 2, 3]);
    for (const choice of four.choices) expect(choice.message.content).toBe(one.choices[0]!.message.content);
    expect(four.usage?.prompt_tokens).toBe(one.usage?.prompt_tokens);
    expect(four.usage?.completion_tokens).toBe(4 * one.usage!.completion_tokens);
    expect(four.usage?.total_tokens).toBe(four.usage!.prompt_tokens + four.usage!.completion_tokens);
  });

  it("n with a temperature and a seed: reproducible, and the choices differ", async () => {
    const body = { model: "tiny", messages, max_tokens: 16, temperature: 1, seed: 1234, n: 3 };
    const first = await client.chat.completions.create(body);
    const again = await client.chat.completions.create(body);
    const texts = first.choices.map((choice) => choice.message.content);
    expect(again.choices.map((choice) => choice.message.content)).toEqual(texts);
    expect(new Set(texts).size).toBe(3);
    // The first choice is what n=1 gives with that seed.
    const single = await client.chat.completions.create({ ...body, n: 1 });
    expect(single.choices[0]!.message.content).toBe(texts[0]);
  });

  it("evaluates the prompt once for n choices and copies it to the other sequences (engine counters)", async () => {
    const fresh = [{ role: "user" as const, content: "A prompt no earlier test sent: describe seven unusual kinds of bread in detail." }];
    const before = await counters();
    const reply = await client.chat.completions.create({ model: "tiny", messages: fresh, max_tokens: 4, temperature: 0, n: 4 });
    const after = await counters();
    const prompt = reply.usage!.prompt_tokens;
    const cached = reply.usage!.prompt_tokens_details?.cached_tokens ?? 0;
    expect(after.promptEvaluations - before.promptEvaluations).toBe(1);
    expect(after.promptCopies - before.promptCopies).toBe(3);
    // The prompt but its last token once; the last token by each choice (its logits start that choice).
    expect(after.promptTokensEvaluated - before.promptTokensEvaluated).toBe(prompt - 1 - cached + 4);
    expect(prompt - 1 - cached + 4).toBeLessThan(2 * (prompt - cached));
  });

  it("streams n choices with an index on every chunk, each finished, and one usage chunk with the totals", async () => {
    const events = await readSseEvents(
      await postJson(`${server.url}/v1/chat/completions`, {
        model: "tiny",
        messages,
        max_tokens: 6,
        temperature: 0,
        n: 2,
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event) as OpenAI.ChatCompletionChunk);
    const usage = chunks.at(-1)!;
    expect(usage.choices).toEqual([]);
    const texts = ["", ""];
    const finishes: Array<string | null> = [null, null];
    for (const chunk of chunks.slice(0, -1)) {
      expect(chunk.choices).toHaveLength(1);
      const choice = chunk.choices[0]!;
      texts[choice.index] += choice.delta.content ?? "";
      if (choice.finish_reason) finishes[choice.index] = choice.finish_reason;
    }
    expect(texts[0]).toBe(texts[1]);
    expect(finishes).toEqual(["length", "length"]);
    expect(usage.usage).toMatchObject({ completion_tokens: 12 });
    const roles = chunks.filter((chunk) => chunk.choices[0]?.delta.role === "assistant").map((chunk) => chunk.choices[0]!.index);
    expect(roles).toEqual([0, 1]);
  });

  it("frees all n sequences when the client leaves mid-stream, and n tool calls each under the grammar", async () => {
    const controller = new AbortController();
    const response = await postJson(
      `${server.url}/v1/chat/completions`,
      { model: "tiny", messages, max_tokens: 4000, n: 4, stream: true },
      { signal: controller.signal },
    );
    const reader = response.body!.getReader();
    await reader.read();
    const busy = (await (await fetch(`${server.url}/health`)).json()) as { loaded: Array<{ active: number }> };
    expect(busy.loaded[0]?.active).toBe(4);
    controller.abort();
    await expect
      .poll(async () => ((await (await fetch(`${server.url}/health`)).json()) as { loaded: Array<{ active: number }> }).loaded[0]?.active, {
        timeout: 10_000,
      })
      .toBe(0);

    const tools = [
      {
        type: "function" as const,
        function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
      },
    ];
    const reply = await client.chat.completions.create({
      model: "tiny",
      messages,
      tools,
      tool_choice: "required",
      parallel_tool_calls: false,
      n: 2,
      max_tokens: 400,
      temperature: 1,
      seed: 3,
    });
    expect(reply.choices).toHaveLength(2);
    for (const choice of reply.choices) {
      expect(choice.finish_reason).toBe("tool_calls");
      const call = choice.message.tool_calls![0]!;
      expect(call.type === "function" && typeof (JSON.parse(call.function.arguments) as { city: unknown }).city).toBe("string");
    }
  });

  it("refuses n above 8 and above the sequences a model decodes together, and top_logprobs above 20", async () => {
    for (const [body, param] of [
      [{ n: 9 }, "n"],
      [{ n: 5 }, "n"],
      [{ logprobs: true, top_logprobs: 21 }, "top_logprobs"],
      [{ top_logprobs: 2 }, "top_logprobs"],
    ] as const) {
      const response = await postJson(`${server.url}/v1/chat/completions`, { model: "tiny", messages, max_tokens: 4, ...body });
      expect(response.status).toBe(400);
      const error = (await response.json()) as { error: { param: string; type: string; message: string } };
      expect(error.error.param).toBe(param);
      expect(error.error.type).toBe("invalid_request_error");
    }
  });
});

// The top of the range: 8 choices need 8 sequences decoded together (--parallel 8).
describe("chat completions: n = 8 on a server decoding 8 sequences", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { parallel: 8, contextSize: 2048 } });
  });
  afterAll(() => server?.close());

  it("answers 8 choices sharing one prompt evaluation, and refuses 9", async () => {
    const before = ((await (await fetch(`${server.url}/health`)).json()) as { counters: EngineCounters }).counters;
    const reply = await server.client.chat.completions.create({ model: "tiny", messages, max_tokens: 6, temperature: 0.9, seed: 11, n: 8 });
    expect(reply.choices.map((choice) => choice.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    for (const choice of reply.choices) expect(choice.message.content?.length).toBeGreaterThan(0);
    const after = ((await (await fetch(`${server.url}/health`)).json()) as { counters: EngineCounters }).counters;
    expect(after.promptEvaluations - before.promptEvaluations).toBe(1);
    expect(after.promptCopies - before.promptCopies).toBe(7);
    const nine = await postJson(`${server.url}/v1/chat/completions`, { model: "tiny", messages, n: 9 });
    expect(nine.status).toBe(400);
    expect(((await nine.json()) as { error: { param: string } }).error.param).toBe("n");
  });
});
