// Issue 15: POST /v1/rerank (and /rerank) on a generated cross-encoder, checked against the
// independent TypeScript computation of the same model (test/support/referenceBert.ts).
import { getLlama } from "node-llama-cpp";
import type { Llama, LlamaModel, Token } from "node-llama-cpp";
import { Ollama } from "ollama";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { presets, type BertPreset } from "../../src/testmodels/presets.js";
import { readWeights, referenceForward, referenceRelevance, RERANK_DOCUMENTS, RERANK_QUERY } from "../support/referenceBert.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

const preset = presets["rerank-tiny"] as BertPreset;

const [QUERY, DOCUMENTS] = [RERANK_QUERY, RERANK_DOCUMENTS];

interface RerankBody {
  model: string;
  object: string;
  results: Array<{ index: number; relevance_score: number; document?: { text: string } }>;
  usage: { prompt_tokens: number; total_tokens: number };
}

interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

describe("POST /v1/rerank", () => {
  let server: TestServer;
  let llama: Llama;
  let vocabulary: LlamaModel;
  let reference: Array<{ index: number; score: number; tokens: number }>;

  beforeAll(async () => {
    const path = await testModelPath("rerank-tiny");
    server = await startTestServer({
      models: { rerank: path, tiny: await testModelPath("tiny"), embed: await testModelPath("embed-tiny") },
    });
    // The model's tokenizer alone (no weights evaluated), for the reference's input tokens.
    llama = await getLlama({ gpu: false, build: "never" });
    vocabulary = await llama.loadModel({ modelPath: path, vocabOnly: true });
    const weights = await readWeights(path, vocabulary);
    const tokenize = (text: string) => vocabulary.tokenize(text, false, "trimLeadingSpace");
    const [cls, sep] = [vocabulary.tokens.bos, vocabulary.tokens.sep] as [Token, Token];
    reference = DOCUMENTS.map((document, index) => {
      // [CLS] query [SEP] [SEP] document [SEP]: BOS, query, EOS, SEP, document, EOS (EOS is [SEP] here).
      const tokens = [cls, ...tokenize(QUERY), sep, sep, ...tokenize(document), sep];
      return { index, score: referenceRelevance(weights, referenceForward(preset, weights, tokens)), tokens: tokens.length };
    });
  });
  afterAll(async () => {
    await server?.close();
    await vocabulary?.dispose();
    await llama?.dispose();
  });

  const rerank = async (body: unknown, path = "/v1/rerank") => {
    const response = await postJson(`${server.url}${path}`, body);
    return { status: response.status, body: (await response.json()) as RerankBody & ErrorBody };
  };

  it("orders the documents as the reference computation does, most relevant first, with the reference's scores", async () => {
    const { status, body } = await rerank({ model: "rerank", query: QUERY, documents: DOCUMENTS });
    expect(status).toBe(200);
    expect(body.model).toBe("rerank");
    expect(body.object).toBe("list");
    const expected = [...reference].sort((a, b) => b.score - a.score);
    expect(body.results.map((result) => result.index)).toEqual(expected.map((item) => item.index));
    for (const [i, result] of body.results.entries()) {
      expect(Object.keys(result).sort()).toEqual(["index", "relevance_score"]);
      expect(result.relevance_score).toBeCloseTo(expected[i]?.score ?? NaN, 2);
      if (i > 0) expect(result.relevance_score).toBeLessThanOrEqual(body.results[i - 1]?.relevance_score ?? NaN);
    }
    // Every query-and-document input evaluated, special tokens included.
    const tokens = reference.reduce((sum, item) => sum + item.tokens, 0);
    expect(body.usage).toEqual({ prompt_tokens: tokens, total_tokens: tokens });
  });

  it("answers the same at /rerank, as llama-server does", async () => {
    const [v1, plain] = await Promise.all([
      rerank({ model: "rerank", query: QUERY, documents: DOCUMENTS }),
      rerank({ model: "rerank", query: QUERY, documents: DOCUMENTS }, "/rerank"),
    ]);
    expect(plain.status).toBe(200);
    expect(plain.body).toEqual(v1.body);
  });

  it("returns the top_n most relevant only", async () => {
    const all = (await rerank({ model: "rerank", query: QUERY, documents: DOCUMENTS })).body.results;
    const { body } = await rerank({ model: "rerank", query: QUERY, documents: DOCUMENTS, top_n: 2 });
    expect(body.results).toEqual(all.slice(0, 2));
    // Usage still counts every document: all were scored.
    expect(body.usage.total_tokens).toBe(reference.reduce((sum, item) => sum + item.tokens, 0));
    const more = await rerank({ model: "rerank", query: QUERY, documents: DOCUMENTS, top_n: 50 });
    expect(more.body.results).toEqual(all);
  });

  it("returns each document's text with return_documents, for strings and {text} objects alike", async () => {
    const documents = [DOCUMENTS[0], { text: DOCUMENTS[1] }, DOCUMENTS[2]];
    const { body } = await rerank({ model: "rerank", query: QUERY, documents, return_documents: true });
    expect(body.results).toHaveLength(3);
    for (const result of body.results) expect(result.document).toEqual({ text: DOCUMENTS[result.index] });
    const without = await rerank({ model: "rerank", query: QUERY, documents, return_documents: false });
    expect(without.body.results.every((result) => !("document" in result))).toBe(true);
    expect(without.body.results.map((result) => result.index)).toEqual(body.results.map((result) => result.index));
  });

  it("scores the same document the same wherever it is in the list", async () => {
    const { body } = await rerank({ model: "rerank", query: QUERY, documents: [DOCUMENTS[3], DOCUMENTS[0], DOCUMENTS[3]] });
    const byIndex = new Map(body.results.map((result) => [result.index, result.relevance_score]));
    expect(byIndex.get(0)).toBe(byIndex.get(2));
    // Ties keep input order.
    const tied = body.results.filter((result) => result.index !== 1).map((result) => result.index);
    expect(tied).toEqual([0, 2]);
  });

  it.each([
    ["empty documents", { model: "rerank", query: QUERY, documents: [] }, "documents", /must not be empty/],
    ["no documents", { model: "rerank", query: QUERY }, "documents", /Missing required parameter/],
    ["no query", { model: "rerank", documents: DOCUMENTS }, "query", /Missing required parameter/],
    ["a number as query", { model: "rerank", query: 5, documents: DOCUMENTS }, "query", /expected string, got an integer/],
    ["a string as documents", { model: "rerank", query: QUERY, documents: "one document" }, "documents", /expected array, got a string/],
    ["a number as a document", { model: "rerank", query: QUERY, documents: ["fine", 7] }, "documents[1]", /string or an object/],
    ["top_n 0", { model: "rerank", query: QUERY, documents: DOCUMENTS, top_n: 0 }, "top_n", /too small/i],
    ["top_n as a string", { model: "rerank", query: QUERY, documents: DOCUMENTS, top_n: "2" }, "top_n", /expected number, got a string/],
    [
      "return_documents as a string",
      { model: "rerank", query: QUERY, documents: DOCUMENTS, return_documents: "yes" },
      "return_documents",
      /expected boolean/,
    ],
    ["1001 documents", { model: "rerank", query: QUERY, documents: Array.from({ length: 1001 }, () => "x") }, "documents", /at most 1000/],
    [
      "a document too long for the context",
      { model: "rerank", query: QUERY, documents: ["short", "lighthouse ".repeat(600)] },
      "documents[1]",
      /at most 511/,
    ],
    [
      "a chat model",
      { model: "tiny", query: QUERY, documents: DOCUMENTS },
      "model",
      /`tiny` is a chat model: it cannot rerank documents\. Use it with \/v1\/chat\/completions or \/v1\/embeddings/,
    ],
    [
      "an embedding model",
      { model: "embed", query: QUERY, documents: DOCUMENTS },
      "model",
      /`embed` is an embedding model: it cannot rerank documents/,
    ],
  ])("refuses %s with a 400 naming %s, in the OpenAI error shape", async (_label, request, param, message) => {
    const { status, body } = await rerank(request);
    expect(status).toBe(400);
    expect(body).toEqual({ error: { message: expect.stringMatching(message), type: "invalid_request_error", param, code: null } });
  });

  it("answers an unknown model with a 404 model_not_found", async () => {
    const { status, body } = await rerank({ model: "nope", query: QUERY, documents: DOCUMENTS });
    expect(status).toBe(404);
    expect(body.error).toMatchObject({ code: "model_not_found", param: "model", type: "invalid_request_error" });
  });

  it("refuses a non-object body", async () => {
    const response = await postJson(`${server.url}/v1/rerank`, "[1, 2]");
    expect(response.status).toBe(400);
    expect(((await response.json()) as ErrorBody).error.message).toMatch(/must be a JSON object/);
  });

  it("refuses to chat or embed with a reranking model, naming what it serves", async () => {
    await expect(
      server.client.chat.completions.create({ model: "rerank", messages: [{ role: "user", content: "hi" }] }),
    ).rejects.toMatchObject({
      status: 400,
      param: "model",
      message: expect.stringMatching(/`rerank` is a reranking model: it cannot generate chat completions\. Use it with \/v1\/rerank\./),
    });
    await expect(server.client.embeddings.create({ model: "rerank", input: "hi" })).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/`rerank` is a reranking model: it cannot compute embeddings/),
    });
    const ollama = new Ollama({ host: server.url });
    await expect(ollama.embed({ model: "rerank", input: "hi" })).rejects.toMatchObject({ status_code: 400 });
  });

  it("lists the capability rerank in /v1/models and the native /api/show", async () => {
    const models = await server.client.models.list();
    const capabilities = Object.fromEntries(
      models.data.map((model) => [model.id, (model as unknown as { capabilities: string[] }).capabilities]),
    );
    expect(capabilities).toEqual({ rerank: ["rerank"], tiny: ["chat", "embeddings", "tools"], embed: ["embeddings"] });
    const ollama = new Ollama({ host: server.url });
    expect((await ollama.show({ model: "rerank" })).capabilities).toEqual(["rerank"]);
    expect((await ollama.show({ model: "embed" })).capabilities).toEqual(["embedding"]);
  });
});
