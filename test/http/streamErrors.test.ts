import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeEngine } from "../support/fakeEngine.js";
import { validatorOf, type OpenApiDocument } from "../support/openApiValidator.js";
import { postJson, readSseEvents, startTestServer, type TestServer } from "../support/startTestServer.js";

/** Failures that carry internals (a path), which no client may see. */
const crash = (what: string) => new Error(`${what} failed at /secret/path/model.gguf`);

describe("errors after a stream started", () => {
  let server: TestServer;
  let url: string;

  beforeAll(async () => {
    // Generation fails after one piece of text, as a crashed decode would; the other calls fail outright.
    const engine = new FakeEngine({
      models: [{ id: "fake", capabilities: ["chat", "embeddings", "rerank"] }],
      reply: { text: ["partial"], failure: crash("decode") },
      failures: { embed: crash("embedding"), rerank: crash("ranking"), tokenize: crash("tokenizing"), detokenize: crash("detokenizing") },
    });
    server = await startTestServer({ engine });
    url = `${server.url}/v1/chat/completions`;
  });
  afterAll(async () => {
    await server?.close();
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

describe("keepalives of a silent Messages stream", () => {
  it("are ping events (--stream-keepalive), not comments", async () => {
    // The one reply waits until the test releases it, so the stream stays silent meanwhile.
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const server = await startTestServer({
      engine: new FakeEngine({ reply: { hold: held, text: "late" } }),
      config: { streamKeepalive: 20 },
    });
    try {
      const base = server.url;
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
      release();
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
      await server.close();
    }
  });
});
