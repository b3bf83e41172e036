import { existsSync } from "node:fs";
import path from "node:path";
import { getLlama } from "node-llama-cpp";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

const dot = (a: readonly number[], b: readonly number[]) => a.reduce((sum, value, i) => sum + value * b[i]!, 0);
const norm = (a: readonly number[]) => Math.sqrt(dot(a, a));

describe("POST /v1/embeddings", () => {
  let server: TestServer;
  let client: OpenAI;

  beforeAll(async () => {
    server = await startTestServer({ models: { embed: await testModelPath("embed-tiny"), tiny: await testModelPath("tiny") } });
    client = server.client;
  });
  afterAll(() => server?.close());

  async function embed(input: string | string[] | number[], extra: Partial<OpenAI.EmbeddingCreateParams> = {}, model = "embed") {
    return client.embeddings.create({ model, input, encoding_format: "float", ...extra });
  }

  it("embeds one text: a unit vector of the model's size, with usage", async () => {
    const reply = await embed("The lighthouse keeper lit the lamp.");
    expect(reply.object).toBe("list");
    expect(reply.model).toBe("embed");
    expect(reply.data).toHaveLength(1);
    const [item] = reply.data;
    expect(item).toMatchObject({ object: "embedding", index: 0 });
    expect(item?.embedding).toHaveLength(64);
    expect(norm(item!.embedding)).toBeCloseTo(1, 5);
    expect(reply.usage.prompt_tokens).toBeGreaterThan(2);
    expect(reply.usage.total_tokens).toBe(reply.usage.prompt_tokens);
  });

  it("embeds a batch in input order, each as it would alone", async () => {
    const texts = ["first text", "a second, longer text about lighthouses", "third"];
    const batch = await embed(texts);
    expect(batch.data.map((item) => item.index)).toEqual([0, 1, 2]);
    for (const [i, text] of texts.entries()) {
      const alone = await embed(text);
      expect(batch.data[i]!.embedding).toEqual(alone.data[0]!.embedding);
    }
    const singles = await Promise.all(texts.map((text) => embed(text)));
    expect(batch.usage.prompt_tokens).toBe(singles.reduce((sum, reply) => sum + reply.usage.prompt_tokens, 0));
  });

  it("gives cosine 1 for identical texts and less for different ones", async () => {
    const { data } = await embed(["the cat sat on the mat", "the cat sat on the mat", "quantum chromodynamics"]);
    const [a, b, c] = data.map((item) => item.embedding);
    expect(dot(a!, b!)).toBeCloseTo(1, 5);
    expect(dot(a!, c!)).toBeLessThan(0.99);
  });

  it("decodes base64 (the official client's default) to the same floats", async () => {
    const text = "base64 round trip";
    const asFloat = await embed(text);
    const viaClient = await client.embeddings.create({ model: "embed", input: text }); // asks for base64 and decodes it
    expect(viaClient.data[0]!.embedding).toEqual(asFloat.data[0]!.embedding.map((value) => Math.fround(value)));
    const raw = (await (
      await postJson(`${server.url}/v1/embeddings`, { model: "embed", input: text, encoding_format: "base64" })
    ).json()) as {
      data: Array<{ embedding: string }>;
    };
    const bytes = Buffer.from(raw.data[0]!.embedding, "base64");
    const floats = Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4));
    expect(floats).toEqual(asFloat.data[0]!.embedding);
  });

  it("shortens vectors to `dimensions`, normalised again", async () => {
    const full = (await embed("shorter please")).data[0]!.embedding;
    const short = (await embed("shorter please", { dimensions: 16 })).data[0]!.embedding;
    expect(short).toHaveLength(16);
    expect(norm(short)).toBeCloseTo(1, 5);
    const head = full.slice(0, 16);
    const scale = norm(head);
    short.forEach((value, i) => expect(value).toBeCloseTo(head[i]! / scale, 5));
  });

  it("embeds token ids like the text they spell", async () => {
    const llama = await getLlama({ gpu: false, build: "never", maxThreads: 1 });
    const vocab = await llama.loadModel({ modelPath: await testModelPath("embed-tiny"), vocabOnly: true });
    const text = "hello world of lighthouses";
    const ids = Array.from(vocab.tokenize(text));
    await vocab.dispose();
    const fromText = (await embed(text)).data[0]!.embedding;
    const fromIds = (await embed(ids)).data[0]!.embedding;
    expect(fromIds).toEqual(fromText);
    const batch = await client.embeddings.create({ model: "embed", input: [ids, ids], encoding_format: "float" });
    expect(batch.data).toHaveLength(2);
  });

  it("embeds with a chat model too (mean pooling over its hidden states)", async () => {
    const { data } = await embed(["one text", "one text", "another text entirely"], {}, "tiny");
    expect(data[0]!.embedding).toHaveLength(64);
    expect(dot(data[0]!.embedding, data[1]!.embedding)).toBeCloseTo(1, 5);
    expect(dot(data[0]!.embedding, data[2]!.embedding)).toBeLessThan(0.99);
  });

  it("cuts a too-long input only when asked with truncate", async () => {
    const long = "lighthouse ".repeat(1000);
    const response = await postJson(`${server.url}/v1/embeddings`, { model: "embed", input: long, truncate: true });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { usage: { prompt_tokens: number } };
    expect(body.usage.prompt_tokens).toBeLessThanOrEqual(512);
  });

  it("lists which models embed and which chat", async () => {
    const models = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: Array<{ id: string; capabilities: string[] }> };
    expect(Object.fromEntries(models.data.map((model) => [model.id, model.capabilities]))).toEqual({
      embed: ["embeddings"],
      // The test template lists the tools it is given.
      tiny: ["chat", "embeddings", "tools"],
    });
  });

  it.each([
    [{ model: "embed", input: "" }, 400, "input"],
    [{ model: "embed", input: [] }, 400, "input"],
    [{ model: "embed", input: ["fine", ""] }, 400, "input[1]"],
    [{ model: "embed", input: Array.from({ length: 2049 }, () => "x") }, 400, "input"],
    [{ model: "embed", input: "lighthouse ".repeat(1000) }, 400, "input[0]"],
    [{ model: "embed", input: [[1, 2], []] }, 400, "input[1]"],
    [{ model: "embed", input: [999999] }, 400, "input[0]"],
    [{ model: "embed", input: 42 }, 400, "input"],
    [{ model: "embed", input: "x", dimensions: 65 }, 400, "dimensions"],
    [{ model: "embed", input: "x", dimensions: 0 }, 400, "dimensions"],
    [{ model: "embed", input: "x", encoding_format: "binary" }, 400, "encoding_format"],
    [{ input: "x" }, 400, "model"],
    [{ model: "nope", input: "x" }, 404, "model"],
  ])("refuses %j with %i naming %s", async (body, status, param) => {
    const response = await postJson(`${server.url}/v1/embeddings`, body);
    expect(response.status).toBe(status);
    const error = ((await response.json()) as { error: { param: string; message: string } }).error;
    expect(error.param).toBe(param);
    if (param === "input[0]" && status === 400 && typeof body.input === "string") expect(error.message).toMatch(/context holds 511/);
  });

  it("serves embeddings while a chat streams on another model, and on the same model", async () => {
    const chat = client.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "Write at length." }],
      max_tokens: 300,
      stream: true,
    });
    let chunks = 0;
    const streaming = (async () => {
      for await (const _chunk of await chat) chunks++;
    })();
    const [other, same] = await Promise.all([embed(["while", "chatting"]), embed(["same", "model"], {}, "tiny")]);
    await streaming;
    expect(other.data).toHaveLength(2);
    expect(same.data).toHaveLength(2);
    expect(chunks).toBeGreaterThan(100);
  });

  it("refuses to chat with an embedding-only model", async () => {
    const response = await postJson(`${server.url}/v1/chat/completions`, { model: "embed", messages: [{ role: "user", content: "hi" }] });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { param: string } }).error.param).toBe("model");
  });
});

// Every token of an embedding input is an output with logits (8 bytes × vocabulary each), so an
// input is at most one batch long: that bounds the memory one request can take.
describe("embedding inputs are at most one batch long", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { batchSize: 64 } });
  });
  afterAll(() => server?.close());

  it("refuses a longer input naming the limit, and cuts it to the batch with truncate", async () => {
    const long = Array.from({ length: 200 }, (_, i) => 100 + i);
    const refused = await postJson(`${server.url}/v1/embeddings`, { model: "tiny", input: long });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(/context holds 63/);
    const cut = await postJson(`${server.url}/v1/embeddings`, { model: "tiny", input: long, truncate: true });
    expect(cut.status).toBe(200);
    expect(((await cut.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens).toBe(63);
  });
});

const sharedModel = path.resolve(import.meta.dirname, "../../../shared/models/llama-2-tiny-random.gguf");

// A GGUF we did not write (real Llama 2 vocabulary); the shared folder is absent outside this workplace.
describe.skipIf(!existsSync(sharedModel))("embeddings with llama-2-tiny-random", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ models: { llama2: sharedModel } });
  });
  afterAll(() => server?.close());

  it("embeds with mean pooling", async () => {
    const reply = await server.client.embeddings.create({ model: "llama2", input: ["a lighthouse", "a lighthouse", "the sea"] });
    const [a, b, c] = reply.data.map((item) => item.embedding);
    expect(a).toHaveLength(8);
    expect(dot(a!, b!)).toBeCloseTo(1, 5);
    expect(dot(a!, c!)).toBeLessThan(0.99999);
  });
});
