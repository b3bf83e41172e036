import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { Ollama } from "ollama";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatEvent, ChatStream } from "../../src/core/ChatEvent.js";
import type { Engine } from "../../src/core/Engine.js";
import type { ModelInfo } from "../../src/core/ModelInfo.js";
import type { PullModel } from "../../src/http/routes/modelManagementRoutes.js";
import { pullModel } from "../../src/models/pullModel.js";
import { buildApp } from "../../src/http/buildApp.js";
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
  async embed(): Promise<never> {
    throw new Error("embedding failed at /secret/path/model.gguf");
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
    return { ready: true, backend: "fake", loaded: [] };
  }
  async close(): Promise<void> {}
}

describe("errors after a stream started", () => {
  let app: FastifyInstance;
  let url: string;

  beforeAll(async () => {
    const connections = { headersTimeout: 10_000, requestTimeout: 10_000, idleTimeout: 10_000, maxConnections: 100 };
    // The real pull, bound to nowhere: these tests do not pull.
    const pull: PullModel = (reference, options) => pullModel(reference, { modelsDir: "/nonexistent", hfEndpoint: "http://127.0.0.1:9", ...options });
    app = await buildApp({ engine: new FailingEngine(), modelsDir: "/nonexistent", pull, bodyLimit: 1024 * 1024, connections, corsOrigins: [] });
    await app.listen({ host: "127.0.0.1", port: 0 });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1/chat/completions`;
  });
  afterAll(() => app?.close());

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

  it("on the native API, end the NDJSON stream with an error object, which the ollama client raises", async () => {
    const base = url.replace("/v1/chat/completions", "");
    const response = await postJson(`${base}/api/chat`, request);
    expect(response.status).toBe(200);
    const lines = (await response.text()).trimEnd().split("\n").map((line) => JSON.parse(line) as unknown);
    expect(lines).toEqual([
      { model: "fake", created_at: expect.any(String), message: { role: "assistant", content: "partial" }, done: false },
      { error: "The server had an error while processing your request." },
    ]);
    const ollama = new Ollama({ host: base });
    await expect((async () => {
      for await (const part of await ollama.chat({ ...request, stream: true })) void part;
    })()).rejects.toThrow("The server had an error while processing your request.");
    // Not streamed: a 500 with the native body, without internals.
    await expect(ollama.chat(request)).rejects.toMatchObject({ status_code: 500, error: "The server had an error while processing your request." });
  });
});
