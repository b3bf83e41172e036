import { existsSync } from "node:fs";
import { access } from "node:fs/promises";
import path from "node:path";
import { Ajv } from "ajv";
import { Ollama, type ChatResponse, type Message, type Tool } from "ollama";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";
import { weatherSchema as weather } from "../support/toolSchemas.js";

// The native API through the official `ollama` npm client, against the real server on generated
// models. The chat model has random weights: it writes gibberish, so tests check shapes, framing,
// determinism and constraints, never meaning.

const messages: Message[] = [{ role: "user", content: "Tell me a story about a lighthouse." }];
const greedy = { temperature: 0, num_predict: 24 };

const tools: Tool[] = [
  { type: "function", function: { name: "get_weather", description: "Current weather in a city", parameters: weather as never } },
];

/** Reads an NDJSON body line by line, checking the framing as it goes. */
async function readNdjson(response: Response): Promise<Record<string, unknown>[]> {
  const text = await response.text();
  expect(text.endsWith("\n")).toBe(true);
  return text
    .slice(0, -1)
    .split("\n")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const TIMINGS = ["total_duration", "prompt_eval_duration", "eval_duration"] as const;

function expectFinalObject(final: Record<string, unknown> | ChatResponse | undefined, evalCount?: number): void {
  expect(final?.done).toBe(true);
  expect(["stop", "length"]).toContain(final?.done_reason);
  for (const key of TIMINGS) {
    const value = (final as Record<string, unknown>)[key];
    expect([key, Number.isInteger(value) && (value as number) > 0]).toEqual([key, true]);
  }
  // A whole request takes longer than reading its prompt, in nanoseconds (not ms or seconds).
  const final_ = final as Record<string, number>;
  expect(final_.total_duration).toBeGreaterThanOrEqual((final_.prompt_eval_duration ?? 0) + (final_.eval_duration ?? 0) - 1e6);
  expect(final_.total_duration).toBeGreaterThan(10_000);
  expect(final_.prompt_eval_count).toBeGreaterThan(5);
  if (evalCount !== undefined) expect(final_.eval_count).toBe(evalCount);
}

describe("native API (/api) with the ollama client", () => {
  let server: TestServer;
  let ollama: Ollama;

  beforeAll(async () => {
    server = await startTestServer({
      models: { tiny: await testModelPath("tiny"), "embed-tiny": await testModelPath("embed-tiny") },
      manifest: { models: [{ file: "tiny.gguf", id: "tiny:1b" }] },
      config: { contextSize: 2048 },
    });
    ollama = new Ollama({ host: server.url });
  });
  afterAll(() => server?.close());

  it("answers the liveness probe and the version", async () => {
    const root = await fetch(server.url);
    expect(root.status).toBe(200);
    expect(root.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await root.text()).toBe("Ollama is running");
    expect((await fetch(server.url, { method: "HEAD" })).status).toBe(200);
    expect((await ollama.version()).version).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it("chats without streaming: one object with the reply, the reason and nanosecond timings", async () => {
    const reply = await ollama.chat({ model: "tiny:1b", messages, options: greedy });
    expect(reply.model).toBe("tiny:1b");
    expect(Date.parse(reply.created_at as unknown as string)).toBeGreaterThan(Date.now() - 60_000);
    expect(reply.message.role).toBe("assistant");
    expect(reply.message.content.length).toBeGreaterThan(0);
    expect(reply.done_reason).toBe("length");
    expectFinalObject(reply, 24);
  });

  it("streams what it answers unstreamed, at temperature 0, ending with done:true", async () => {
    const plain = await ollama.chat({ model: "tiny:1b", messages, options: { ...greedy, seed: 7 } });
    const parts: ChatResponse[] = [];
    for await (const part of await ollama.chat({ model: "tiny:1b", messages, options: { ...greedy, seed: 7 }, stream: true }))
      parts.push(part);
    expect(parts.length).toBeGreaterThan(2);
    expect(parts.slice(0, -1).every((part) => part.done === false)).toBe(true);
    expect(parts.map((part) => part.message.content).join("")).toBe(plain.message.content);
    expect(parts.at(-1)?.message.content).toBe("");
    expectFinalObject(parts.at(-1), 24);
  });

  it("frames a raw stream as NDJSON: one object per line, the last done:true with integer ns timings", async () => {
    const response = await postJson(`${server.url}/api/chat`, { model: "tiny:1b", messages, options: { num_predict: 8 } });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/x-ndjson");
    const objects = await readNdjson(response);
    // Streaming is the default: a piece of text per token (fewer when a character spans tokens), then the final object.
    expect(objects.length).toBeGreaterThan(2);
    expect(objects.length).toBeLessThanOrEqual(9);
    for (const object of objects.slice(0, -1)) {
      expect(object).toEqual({
        model: "tiny:1b",
        created_at: expect.any(String),
        message: { role: "assistant", content: expect.any(String) },
        done: false,
      });
    }
    expectFinalObject(objects.at(-1), 8);
  });

  it("frees the model's slot when a client leaves a stream", async () => {
    const controller = new AbortController();
    const response = await postJson(
      `${server.url}/api/chat`,
      { model: "tiny:1b", messages, options: { num_predict: 2000 } },
      { signal: controller.signal },
    );
    const reader = response.body?.getReader();
    expect((await reader?.read())?.done).toBe(false);
    controller.abort();
    // Within a bounded time the model reports no request decoding or waiting.
    const busy = async () => {
      const health = (await (await fetch(`${server.url}/health`)).json()) as {
        loaded: Array<{ id: string; active: number; queued: number }>;
      };
      return health.loaded.some((model) => model.id === "tiny:1b" && model.active + model.queued > 0);
    };
    await expect.poll(busy, { timeout: 2000, interval: 20 }).toBe(false);
  });

  it("resolves name:tag, with :latest implied", async () => {
    for (const model of ["tiny:1b", "embed-tiny", "embed-tiny:latest"]) {
      const reply = await ollama.embed({ model, input: "x" });
      expect(reply.embeddings).toHaveLength(1);
    }
    await expect(ollama.embed({ model: "tiny", input: "x" })).rejects.toMatchObject({ status_code: 404 });
  });

  it("returns tool calls with arguments as objects, each call whole, valid against its schema", async () => {
    // The random model opens a call by chance at a high temperature; the grammar then makes it valid.
    const validate = new Ajv().compile(weather);
    const request = {
      model: "tiny:1b",
      messages: [{ role: "user", content: "Weather in Paris?" }],
      tools,
      options: { temperature: 100, top_k: 0, top_p: 1, num_predict: 300 },
    };
    let called: { seed: number; reply: ChatResponse } | undefined;
    for (let seed = 1; seed <= 40 && !called; seed++) {
      const reply = await ollama.chat({ ...request, options: { ...request.options, seed } });
      if (reply.message.tool_calls?.length) called = { seed, reply };
    }
    expect(called, "a call within 40 seeds").toBeDefined();
    const calls = called?.reply.message.tool_calls ?? [];
    for (const call of calls) {
      expect(call.function.name).toBe("get_weather");
      expect(typeof call.function.arguments).toBe("object");
      expect(validate(call.function.arguments), JSON.stringify(validate.errors)).toBe(true);
    }
    // Streamed, each call arrives whole in one object, before the final one.
    const parts: ChatResponse[] = [];
    for await (const part of await ollama.chat({ ...request, options: { ...request.options, seed: called?.seed }, stream: true }))
      parts.push(part);
    const functions = (list: typeof calls) => list.map((call) => call.function);
    expect(functions(parts.flatMap((part) => part.message.tool_calls ?? []))).toEqual(functions(calls));
    expect(parts.at(-1)?.message.tool_calls).toBeUndefined();

    // The calls and their results go back in the native shape (tool_name, no ids), and the model carries on.
    const followUp = await ollama.chat({
      model: "tiny:1b",
      messages: [
        ...request.messages,
        { role: "assistant", content: "", tool_calls: calls.map((call) => ({ function: call.function })) },
        ...calls.map((call) => ({ role: "tool", content: '{"temperature": 11}', tool_name: call.function.name })),
      ],
      tools,
      options: greedy,
    });
    expect(followUp.done).toBe(true);
  });

  it("constrains output to a JSON schema given as format, and to JSON with format json", async () => {
    const schema = {
      type: "object",
      properties: {
        name: { type: "string", maxLength: 10 },
        age: { type: "integer" },
        tags: { type: "array", items: { type: "string", maxLength: 5 }, maxItems: 3 },
      },
      required: ["name", "age", "tags"],
      additionalProperties: false,
    };
    const validate = new Ajv().compile(schema);
    for (const seed of [1, 2, 3]) {
      const reply = await ollama.chat({
        model: "tiny:1b",
        messages,
        format: schema,
        options: { temperature: 0.8, seed, num_predict: 300 },
      });
      expect(validate(JSON.parse(reply.message.content)), reply.message.content).toBe(true);
    }
    const json = await ollama.generate({
      model: "tiny:1b",
      prompt: "Paris as JSON",
      format: "json",
      options: { temperature: 0.8, seed: 3, num_predict: 300 },
    });
    expect(JSON.parse(json.response ?? "")).toBeTypeOf("object");
  });

  it("generates from a prompt, templated or raw, streamed or not", async () => {
    const plain = await ollama.generate({ model: "tiny:1b", prompt: "Once upon a time", system: "Be brief.", options: greedy });
    expect(plain.response?.length).toBeGreaterThan(0);
    expectFinalObject(plain as never, 24);
    let streamed = "";
    for await (const part of await ollama.generate({
      model: "tiny:1b",
      prompt: "Once upon a time",
      system: "Be brief.",
      options: greedy,
      stream: true,
    })) {
      streamed += part.response;
    }
    expect(streamed).toBe(plain.response);
    // Raw: the prompt as given, no template, so fewer prompt tokens than with the chat template around it.
    const raw = await ollama.generate({ model: "tiny:1b", prompt: "Once upon a time", raw: true, options: greedy, context: [1, 2, 3] });
    expect(raw.prompt_eval_count).toBeLessThan(plain.prompt_eval_count);
    await expect(ollama.generate({ model: "tiny:1b", prompt: "x", raw: true, system: "s" })).rejects.toMatchObject({
      status_code: 400,
      error: "raw mode does not support template, system, or context",
    });
  });

  it("refuses suffix on a model without fill-in-the-middle tokens, and images on a text-only model (an unknown model first)", async () => {
    await expect(ollama.generate({ model: "tiny:1b", prompt: "def f(", suffix: "return x" })).rejects.toMatchObject({
      status_code: 400,
      error: expect.stringMatching(/cannot fill in the middle/),
    });
    const image = Buffer.from("not really a png").toString("base64");
    await expect(ollama.chat({ model: "tiny:1b", messages: [{ role: "user", content: "?", images: [image] }] })).rejects.toMatchObject({
      status_code: 400,
      error: expect.stringMatching(/does not read images: it has no vision projector/),
    });
    await expect(ollama.generate({ model: "tiny:1b", prompt: "?", images: [image] })).rejects.toMatchObject({ status_code: 400 });
    // A model that does not exist is the error, not what the request asks of it.
    for (const refused of [
      ollama.chat({ model: "nope", messages: [{ role: "user", content: "?", images: [image] }] }),
      ollama.generate({ model: "nope", prompt: "?", images: [image] }),
    ]) {
      await expect(refused).rejects.toMatchObject({ status_code: 404, error: 'model "nope" not found, try pulling it first' });
    }
  });

  it("embeds a string or a batch, normalised, with dimensions; legacy embeddings are not normalised", async () => {
    const batch = await ollama.embed({ model: "embed-tiny", input: ["a lighthouse", "the sea"] });
    expect(batch.model).toBe("embed-tiny");
    expect(batch.embeddings).toHaveLength(2);
    const norm = (vector: number[]) => Math.hypot(...vector);
    for (const vector of batch.embeddings) expect(norm(vector)).toBeCloseTo(1, 5);
    expect(Number.isInteger(batch.total_duration) && batch.total_duration > 0).toBe(true);
    expect(batch.prompt_eval_count).toBeGreaterThan(2);
    const single = await ollama.embed({ model: "embed-tiny", input: "the sea", dimensions: 16 });
    expect(single.embeddings[0]).toHaveLength(16);
    expect(norm(single.embeddings[0] ?? [])).toBeCloseTo(1, 5);
    expect((await ollama.embed({ model: "embed-tiny", input: [] })).embeddings).toEqual([]);

    const legacy = await ollama.embeddings({ model: "embed-tiny", prompt: "the sea" });
    const normalised = (await ollama.embed({ model: "embed-tiny", input: "the sea" })).embeddings[0] ?? [];
    expect(legacy.embedding).toHaveLength(normalised.length);
    const scale = norm(legacy.embedding);
    legacy.embedding.forEach((value, i) => expect(value / scale).toBeCloseTo(normalised[i] ?? NaN, 5));
  });

  it("lists models with digests and GGUF details, and shows one", async () => {
    const { models } = await ollama.list();
    const tiny = models.find((model) => model.name === "tiny:1b");
    expect(tiny).toMatchObject({
      model: "tiny:1b",
      size: expect.any(Number),
      digest: expect.stringMatching(/^[0-9a-f]{64}$/),
      details: {
        format: "gguf",
        family: "llama",
        families: ["llama"],
        quantization_level: "F16",
        parameter_size: expect.stringMatching(/^\d+(\.\d+)?[KMB]$/),
      },
    });
    expect(Date.parse(tiny?.modified_at as unknown as string)).toBeGreaterThan(0);
    expect(models.find((model) => model.name === "embed-tiny:latest")?.details.family).toBe("bert");

    const shown = await ollama.show({ model: "tiny:1b" });
    expect(shown.details.family).toBe("llama");
    // The client's type says Map, but the wire (and the client at run time) has a plain object.
    const modelInfo = shown.model_info as unknown as Record<string, unknown>;
    expect(modelInfo["general.architecture"]).toBe("llama");
    expect(modelInfo["llama.context_length"]).toBe(4096);
    expect(shown.template).toContain("<|im_start|>");
    expect(shown.capabilities).toEqual(["completion", "tools", "embedding"]);
    expect(shown.parameters).toMatch(/^temperature\s+0\.8$/m);
    expect((await ollama.show({ model: "embed-tiny" })).capabilities).toEqual(["embedding"]);
  });

  it("loads on an empty-messages request, unloads with keep_alive 0, and ps shows it", async () => {
    const unloaded = await ollama.chat({ model: "tiny:1b", messages: [], keep_alive: 0 });
    expect(unloaded).toMatchObject({ done: true, done_reason: "unload", message: { role: "assistant", content: "" } });
    expect((await ollama.ps()).models.map((model) => model.name)).not.toContain("tiny:1b");

    // One object even when streaming was asked for, as the reference server answers.
    const parts: ChatResponse[] = [];
    for await (const part of await ollama.chat({ model: "tiny:1b", messages: [], keep_alive: "10m", stream: true })) parts.push(part);
    expect(parts).toMatchObject([{ done: true, done_reason: "load" }]);
    const running = (await ollama.ps()).models.find((model) => model.name === "tiny:1b");
    expect(running).toMatchObject({ size_vram: 0, digest: expect.stringMatching(/^[0-9a-f]{64}$/), details: { family: "llama" } });
    const expiresIn = Date.parse(running?.expires_at as unknown as string) - Date.now();
    expect(expiresIn).toBeGreaterThan(8 * 60_000);
    expect(expiresIn).toBeLessThanOrEqual(10 * 60_000);

    // -1 keeps it forever: expires_at is the reference server's "forever" (Go's largest duration), far off.
    const forever = await ollama.generate({ model: "tiny:1b", prompt: "", raw: true, keep_alive: -1 });
    expect(forever).toMatchObject({ done: true, done_reason: "load" });
    const kept = (await ollama.ps()).models.find((model) => model.name === "tiny:1b");
    expect(Date.parse(kept?.expires_at as unknown as string) - Date.now()).toBeGreaterThan(100 * 365 * 86_400_000);

    // keep_alive 0 on a real request: the model goes once the reply is done.
    await ollama.generate({ model: "tiny:1b", prompt: "hi", options: { num_predict: 2 }, keep_alive: 0 });
    expect((await ollama.ps()).models.map((model) => model.name)).not.toContain("tiny:1b");
  });

  it("copies a model to another name, and deletes the copy, then the model", async () => {
    await ollama.copy({ source: "embed-tiny", destination: "my-embedder:v1" });
    expect((await ollama.list()).models.map((model) => model.name)).toContain("my-embedder:v1");
    expect((await ollama.embed({ model: "my-embedder:v1", input: "x" })).embeddings).toHaveLength(1);
    await expect(ollama.copy({ source: "nope", destination: "x" })).rejects.toMatchObject({
      status_code: 404,
      error: 'model "nope" not found',
    });

    await ollama.delete({ model: "my-embedder:v1" });
    await expect(ollama.embed({ model: "my-embedder:v1", input: "x" })).rejects.toMatchObject({ status_code: 404 });
    const names = (await ollama.list()).models.map((model) => model.name);
    expect(names).not.toContain("my-embedder:v1");
    expect(names).toContain("embed-tiny:latest");

    await ollama.delete({ model: "embed-tiny" });
    expect((await ollama.list()).models.map((model) => model.name)).not.toContain("embed-tiny:latest");
    await expect(access(path.join(server.modelsDir, "embed-tiny.gguf"))).rejects.toThrow();
    await expect(ollama.delete({ model: "embed-tiny" })).rejects.toMatchObject({ status_code: 404 });
  });

  it("answers errors in the native shape with the right status", async () => {
    await expect(ollama.chat({ model: "missing", messages })).rejects.toMatchObject({
      status_code: 404,
      error: 'model "missing" not found, try pulling it first',
    });
    await expect(ollama.show({ model: "missing:7b" })).rejects.toMatchObject({
      status_code: 404,
      error: expect.stringContaining("not found"),
    });
    await expect(ollama.chat({ model: "tiny:1b", messages, keep_alive: "300" })).rejects.toMatchObject({
      status_code: 400,
      error: expect.stringMatching(/keep_alive/),
    });
    await expect(ollama.create({ model: "new", from: "tiny:1b" })).rejects.toMatchObject({
      status_code: 501,
      error: expect.stringMatching(/modelhost pull/),
    });

    for (const [body, pattern] of [
      ["{", /JSON/],
      [{ messages }, /model/],
      [{ model: "tiny:1b", messages: [{ role: "robot", content: "x" }] }, /messages\[0\]\.role/],
      [{ model: "tiny:1b", messages, options: { temperature: "hot" } }, /options\.temperature/],
      [{ model: "tiny:1b", messages, format: { type: "string", pattern: "(?=a)" } }, /pattern/],
    ] as const) {
      const response = await postJson(`${server.url}/api/chat`, body);
      expect(response.status).toBe(400);
      expect(response.headers.get("content-type")).toMatch(/^application\/json/);
      const error = (await response.json()) as { error: unknown };
      expect(Object.keys(error)).toEqual(["error"]);
      expect(error.error).toMatch(pattern);
    }
    const unknown = await fetch(`${server.url}/api/nothing`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: expect.stringMatching(/Unknown request URL/) });
  });
});

// A GGUF this project did not write, with the SHA-256 its provider publishes (../shared/models/README.md).
const sharedModel = path.resolve(import.meta.dirname, "../../../shared/models/llama-2-tiny-random.gguf");

describe.skipIf(!existsSync(sharedModel))("native API on a third-party GGUF (llama-2-tiny-random)", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ models: { "llama-2-tiny-random": sharedModel } });
  });
  afterAll(() => server?.close());

  it("lists the file's published SHA-256 as its digest, and its GGUF details", async () => {
    const ollama = new Ollama({ host: server.url });
    const [model] = (await ollama.list()).models;
    expect(model).toMatchObject({
      name: "llama-2-tiny-random:latest",
      size: 1_750_560,
      digest: "81f226c62d28ed4a1a9b9fa080fcd9f0cc40e0f9d5680036583ff98fbcd035cb",
      details: { family: "llama", quantization_level: "F16", parameter_size: "513K" },
    });
    const shown = await ollama.show({ model: "llama-2-tiny-random" });
    expect(shown.template).toBe("");
    expect((shown.model_info as unknown as Record<string, unknown>)["general.name"]).toBe("LLaMA v2");
    const reply = await ollama.generate({ model: "llama-2-tiny-random", prompt: "Hello", options: { num_predict: 4 } });
    expect(reply.eval_count).toBe(4);
  });
});
