import { mkdtemp, rm } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatEvent, ChatStream } from "../../src/core/ChatEvent.js";
import type { Engine } from "../../src/core/Engine.js";
import type { ModelInfo } from "../../src/core/ModelInfo.js";
import { buildApp } from "../../src/http/buildApp.js";
import { ResponseArchive } from "../../src/storedResponses/ResponseArchive.js";
import { SqliteResponseStore } from "../../src/storedResponses/SqliteResponseStore.js";
import { EmptyModelStore } from "../support/emptyModelStore.js";
import { validatorOf, type OpenApiDocument } from "../support/openApiValidator.js";
import { postJson, readSseEvents } from "../support/startTestServer.js";

const model: ModelInfo = {
  id: "fake",
  aliases: [],
  path: "/models/fake.gguf",
  sizeBytes: 1,
  created: 0,
  architecture: "llama",
  hasChatTemplate: true,
  fillInTheMiddle: false,
  capabilities: ["chat", "embeddings"],
};

/** An engine whose generation fails after one piece of text, as a crashed decode would. */
class FailingEngine implements Engine {
  async listModels(): Promise<ModelInfo[]> {
    return [model];
  }
  async findModel(name: string): Promise<ModelInfo | undefined> {
    return name === model.id ? model : undefined;
  }
  async chat(): Promise<ChatStream> {
    return (async function* (): AsyncGenerator<ChatEvent> {
      yield { type: "text", text: "partial" };
      throw new Error("decode failed at /secret/path/model.gguf");
    })();
  }
  async countTokens(): Promise<number> {
    return 1;
  }
  async chatChoices(): Promise<ChatStream[]> {
    return [await this.chat()];
  }
  async embed(): Promise<never> {
    throw new Error("embedding failed at /secret/path/model.gguf");
  }
  async rerank(): Promise<never> {
    throw new Error("ranking failed at /secret/path/model.gguf");
  }
  async tokenize(): Promise<never> {
    throw new Error("tokenizing failed at /secret/path/model.gguf");
  }
  async detokenize(): Promise<never> {
    throw new Error("detokenizing failed at /secret/path/model.gguf");
  }
  async load(): Promise<never> {
    throw new Error("load failed at /secret/path/model.gguf");
  }
  async unload(): Promise<ModelInfo> {
    return model;
  }
  async describeModel(): Promise<undefined> {
    return undefined;
  }
  async modelDigest(): Promise<string> {
    return "0".repeat(64);
  }
  status() {
    return { ready: true, backend: "fake", loaded: [], counters: { promptEvaluations: 0, promptTokensEvaluated: 0, promptCopies: 0 } };
  }
  async close(): Promise<void> {}
}

describe("errors after a stream started", () => {
  let app: FastifyInstance;
  let url: string;
  let dataDir: string;
  let responses: ResponseArchive;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-stream-errors-"));
    responses = new ResponseArchive(async () => SqliteResponseStore.open(path.join(dataDir, "modelhost.db")), {
      ttlMs: 60_000,
      logger: console,
    });
    const connections = { headersTimeout: 10_000, requestTimeout: 10_000, idleTimeout: 10_000, maxConnections: 100 };
    // These tests change no models.
    app = await buildApp({
      engine: new FailingEngine(),
      responses,
      models: new EmptyModelStore(),
      bodyLimit: 1024 * 1024,
      connections,
      corsOrigins: [],
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1/chat/completions`;
  });
  afterAll(async () => {
    await app?.close();
    await responses?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const request = { model: "fake", messages: [{ role: "user", content: "hi" }] };

  it("end the stream with an error event, without [DONE] and without internals", async () => {
    const response = await postJson(url, { ...request, stream: true });
    expect(response.status).toBe(200);
    const events = await readSseEvents(response);
    expect(events).toHaveLength(3);
    expect(JSON.parse(events[0]!).choices[0].delta).toEqual({ role: "assistant", content: "" });
    expect(JSON.parse(events[1]!).choices[0].delta).toEqual({ content: "partial" });
    expect(JSON.parse(events[2]!)).toEqual({
      error: { message: "The server had an error while processing your request.", type: "server_error", param: null, code: null },
    });
  });

  it("become a 500 for a request that is not streamed", async () => {
    const response = await postJson(url, request);
    expect(response.status).toBe(500);
    const text = await response.text();
    expect(text).not.toContain("/secret/path");
    expect(JSON.parse(text)).toMatchObject({ error: { type: "server_error", code: null } });
  });

  it("in rerank and the tokenizer endpoints, become a 500 in the OpenAI shape, without internals", async () => {
    const base = url.replace("/v1/chat/completions", "");
    const bodies: Array<[string, unknown]> = [
      ["/v1/rerank", { model: "fake", query: "q", documents: ["d"] }],
      ["/tokenize", { model: "fake", content: "hi" }],
      ["/detokenize", { model: "fake", tokens: [1] }],
    ];
    for (const [path, body] of bodies) {
      const response = await postJson(`${base}${path}`, body);
      expect(response.status, path).toBe(500);
      const text = await response.text();
      expect(text).not.toContain("/secret/path");
      expect(JSON.parse(text)).toEqual({
        error: { message: "The server had an error while processing your request.", type: "server_error", param: null, code: null },
      });
    }
  });

  it("on the native API, end the NDJSON stream with an error object, which the ollama client raises", async () => {
    const base = url.replace("/v1/chat/completions", "");
    const response = await postJson(`${base}/api/chat`, request);
    expect(response.status).toBe(200);
    const lines = (await response.text())
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as unknown);
    expect(lines).toEqual([
      { model: "fake", created_at: expect.any(String), message: { role: "assistant", content: "partial" }, done: false },
      { error: "The server had an error while processing your request." },
    ]);
    // The API description's stream line includes that last line, on /api/generate as well.
    const document = (await (await fetch(`${base}/openapi.json`)).json()) as OpenApiDocument;
    const { expectValid } = validatorOf(() => document);
    for (const line of lines) expectValid("PostApiChatEvent", line);
    const generated = (await (await postJson(`${base}/api/generate`, { model: "fake", prompt: "hi" })).text())
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as unknown);
    expect(generated).toEqual([
      { model: "fake", created_at: expect.any(String), response: "partial", done: false },
      { error: "The server had an error while processing your request." },
    ]);
    for (const line of generated) expectValid("PostApiGenerateEvent", line);
    const ollama = new Ollama({ host: base });
    await expect(
      (async () => {
        for await (const part of await ollama.chat({ ...request, stream: true })) void part;
      })(),
    ).rejects.toThrow("The server had an error while processing your request.");
    // Not streamed: a 500 with the native body, without internals.
    await expect(ollama.chat(request)).rejects.toMatchObject({
      status_code: 500,
      error: "The server had an error while processing your request.",
    });
  });

  it("on the Messages API, end the stream with an `error` event, which the SDK raises", async () => {
    const base = url.replace("/v1/chat/completions", "");
    const messages = { model: "fake", max_tokens: 5, messages: [{ role: "user" as const, content: "hi" }] };
    const response = await postJson(`${base}/v1/messages`, { ...messages, stream: true });
    expect(response.status).toBe(200);
    const blocks = (await response.text()).split("\n\n").filter((block) => block !== "");
    expect(blocks.map((block) => /^event: (\S+)\n/.exec(block)?.[1])).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "error",
    ]);
    expect(JSON.parse(blocks.at(-1)!.split("\ndata: ")[1]!)).toEqual({
      type: "error",
      error: { type: "api_error", message: "The server had an error while processing your request." },
    });
    const client = new Anthropic({ baseURL: base, apiKey: "local", maxRetries: 0 });
    await expect(client.messages.stream(messages).finalMessage()).rejects.toThrow("The server had an error while processing your request.");
    // Not streamed: a 500 in the Messages shape, without internals.
    await expect(client.messages.create(messages)).rejects.toMatchObject({
      status: 500,
      error: { type: "error", error: { type: "api_error" } },
    });
  });

  it("on the Responses API, end the typed stream with an error event, which the openai client yields as its last; not streamed, a 500", async () => {
    const base = url.replace("/chat/completions", "");
    const response = await postJson(`${base}/responses`, { model: "fake", input: "hi", stream: true });
    expect(response.status).toBe(200);
    const blocks = (await response.text()).split("\n\n").filter(Boolean);
    const events = blocks.map((block) => {
      const [eventLine, dataLine] = block.split("\n");
      const data = JSON.parse(dataLine!.slice("data: ".length)) as { type: string; sequence_number: number };
      expect(eventLine).toBe(`event: ${data.type}`);
      return data;
    });
    expect(events.map((event) => event.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "error",
    ]);
    expect(events.map((event) => event.sequence_number)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(events.at(-1)).toEqual({
      type: "error",
      code: null,
      message: "The server had an error while processing your request.",
      param: null,
      sequence_number: 5,
    });

    const client = new OpenAI({ baseURL: base, apiKey: "local", maxRetries: 0 });
    // The client's raw stream throws only for payloads with an `error` field; the typed `error`
    // event is one of its ResponseStreamEvent union, yielded like the others.
    const received: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of await client.responses.create({ model: "fake", input: "hi", stream: true })) received.push(event);
    expect(received.at(-1)).toMatchObject({ type: "error", message: "The server had an error while processing your request." });
    const plain = await postJson(`${base}/responses`, { model: "fake", input: "hi" });
    expect(plain.status).toBe(500);
    const text = await plain.text();
    expect(text).not.toContain("/secret/path");
    expect(JSON.parse(text)).toMatchObject({ error: { type: "server_error", code: null } });
  });
});

/** An engine whose one reply waits until the test releases it, so a stream stays silent meanwhile. */
class HeldEngine extends FailingEngine {
  release: () => void = () => undefined;
  override async chat(): Promise<ChatStream> {
    const released = new Promise<void>((resolve) => (this.release = resolve));
    return (async function* (): AsyncGenerator<ChatEvent> {
      await released;
      yield { type: "text", text: "late" };
      yield {
        type: "done",
        finishReason: "stop",
        usage: { promptTokens: 3, cachedTokens: 0, completionTokens: 1 },
        timings: { loadMs: 0, promptMs: 0, generationMs: 0 },
      };
    })();
  }
}

describe("keepalives of a silent Messages stream", () => {
  it("are ping events (--stream-keepalive), not comments", async () => {
    const engine = new HeldEngine();
    const connections = { headersTimeout: 10_000, requestTimeout: 10_000, idleTimeout: 10_000, maxConnections: 100 };
    // Opened on first use, which this test never makes.
    const responses = new ResponseArchive(
      async () => SqliteResponseStore.open(path.join(await mkdtemp(path.join(os.tmpdir(), "modelhost-keepalive-")), "modelhost.db")),
      { ttlMs: 60_000, logger: console },
    );
    const app = await buildApp({
      engine,
      responses,
      models: new EmptyModelStore(),
      bodyLimit: 1024 * 1024,
      connections,
      corsOrigins: [],
      streamLimits: { keepaliveMs: 20, stallMs: 0 },
    });
    try {
      await app.listen({ host: "127.0.0.1", port: 0 });
      const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      const response = await postJson(`${base}/v1/messages`, {
        model: "fake",
        max_tokens: 5,
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      });
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
      // Read until two pings arrived: the one after message_start, then a keepalive one.
      let text = "";
      while ((text.match(/event: ping\n/g) ?? []).length < 2) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`the stream ended early: ${text}`);
        text += value;
      }
      engine.release();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += value;
      }
      const names = text
        .split("\n\n")
        .filter((block) => block !== "")
        .map((block) => /^event: (\S+)\ndata: /.exec(block)?.[1]);
      expect(names.slice(0, 3)).toEqual(["message_start", "ping", "ping"]);
      expect(names.slice(-5)).toEqual([
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
      ]);
      expect(text).not.toContain(": keepalive");
      expect(text).toContain('event: ping\ndata: {"type":"ping"}\n\n');
    } finally {
      await app.close();
    }
  });
});
