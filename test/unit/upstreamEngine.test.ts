import { afterEach, describe, expect, it, vi } from "vitest";
import { fromChatCompletionRequest } from "../../src/protocols/openai/fromChatCompletionRequest.js";
import type { UpstreamTransport } from "../../src/upstream/httpTransport.js";
import { UpstreamEngine } from "../../src/upstream/UpstreamEngine.js";

/** An upstream's streamed reply: a chunk of text, a finish and the usage, as server-sent events. */
function sseReply(): Response {
  const events = [
    { choices: [{ index: 0, delta: { content: "Hi" }, finish_reason: null }] },
    { choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
    { choices: [], usage: { prompt_tokens: 5, completion_tokens: 1 } },
  ];
  const text = events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join("") + "data: [DONE]\n\n";
  return new Response(text, { headers: { "content-type": "text/event-stream" } });
}

const request = fromChatCompletionRequest({ model: "remote", messages: [{ role: "user", content: "Hello" }] }).chat;
const models = new Map([
  [
    "remote",
    {
      endpoints: [{ url: "http://upstream.invalid/v1", weight: 1, maxConcurrent: 4 }],
      capabilities: ["chat" as const],
      rerankScores: "probability" as const,
    },
  ],
]);
const timeouts = { connectMs: 5_000, firstByteMs: 5_000, idleMs: 5_000 };

describe("UpstreamEngine's hold on an endpoint", () => {
  it("gives the endpoint back when the stream is returned before its first event is read", async () => {
    const engine = new UpstreamEngine(models, { timeouts, transport: async () => sseReply() });
    const endpoint = engine.pools.get("remote")!.endpoints[0]!;
    const stream = await engine.chat(request, { signal: new AbortController().signal });
    expect(endpoint.inFlight).toBe(1);
    await stream.return();
    expect(endpoint.inFlight).toBe(0);
    expect(endpoint.down).toBe(false);
  });

  it("reads a whole stream into events, with the upstream's usage, and gives the endpoint back", async () => {
    const engine = new UpstreamEngine(models, { timeouts, transport: async () => sseReply() });
    const events = [];
    for await (const event of await engine.chat(request, { signal: new AbortController().signal })) events.push(event);
    expect(events.map((event) => event.type)).toEqual(["text", "done"]);
    expect(events.at(-1)).toMatchObject({ finishReason: "stop", usage: { promptTokens: 5, completionTokens: 1 } });
    expect(engine.pools.get("remote")!.endpoints[0]!.inFlight).toBe(0);
  });

  it("does not hold clients that leave before the first byte against the endpoint", async () => {
    // An upstream that answers only when the request is aborted, as fetch does.
    const hanging: typeof fetch = (_input, init) =>
      new Promise((_resolve, reject) => init?.signal?.addEventListener("abort", () => reject(init.signal!.reason)));
    const engine = new UpstreamEngine(models, { timeouts, transport: hanging });
    for (let i = 0; i < 4; i++) {
      const controller = new AbortController();
      const pending = engine.chat(request, { signal: controller.signal });
      controller.abort(new Error("client left"));
      await expect(pending).rejects.toThrow("client left");
    }
    const endpoint = engine.pools.get("remote")!.endpoints[0]!;
    expect(endpoint.down).toBe(false);
    expect(endpoint.inFlight).toBe(0);
  });
});

describe("UpstreamEngine's check that endpoints report usage", () => {
  /** An upstream's stream of one chunk and its finish, with or without the usage chunk. */
  const streamed = (usage: boolean) => {
    const events = [
      { choices: [{ index: 0, delta: { content: "Hi" }, finish_reason: "length" }] },
      ...(usage ? [{ choices: [], usage: { prompt_tokens: 5, completion_tokens: 1 } }] : []),
    ];
    return new Response(events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join("") + "data: [DONE]\n\n");
  };
  const declared = (urls: string[]) =>
    new Map([
      [
        "remote",
        {
          endpoints: urls.map((url) => ({ url, weight: 1, maxConcurrent: 4 })),
          capabilities: ["chat" as const],
          rerankScores: "probability" as const,
        },
      ],
    ]);

  it("finds the endpoint that streams without usage, and only reports one it cannot ask now", async () => {
    const asked: string[] = [];
    const fetch: typeof globalThis.fetch = async (input, init) => {
      const url = String(input);
      asked.push(`${url} ${JSON.parse(String(init?.body)).max_tokens}`);
      if (url.startsWith("http://good")) return streamed(true);
      if (url.startsWith("http://bare")) return streamed(false);
      if (url.startsWith("http://missing")) return new Response('{"error":{"message":"no such model"}}', { status: 404 });
      throw new TypeError("fetch failed");
    };
    const engine = new UpstreamEngine(new Map(), { timeouts, transport: fetch });
    const problems = await engine.checkUsage(declared(["http://good/v1", "http://bare/v1", "http://missing/v1", "http://down/v1"]));
    expect(asked.sort()).toEqual([
      "http://bare/v1/chat/completions 1",
      "http://down/v1/chat/completions 1",
      "http://good/v1/chat/completions 1",
      "http://missing/v1/chat/completions 1",
    ]);
    expect(problems).toEqual([
      { model: "remote", endpoint: "http://bare/v1", noUsage: true, reason: expect.stringMatching(/no usage/) },
      { model: "remote", endpoint: "http://missing/v1", noUsage: false, reason: "HTTP 404: no such model" },
      { model: "remote", endpoint: "http://down/v1", noUsage: false, reason: "fetch failed" },
    ]);
    // Once served as declared, the model is not asked again (a SIGHUP that keeps it).
    const serving = new UpstreamEngine(declared(["http://good/v1"]), { timeouts, transport: fetch });
    asked.length = 0;
    expect(await serving.checkUsage(declared(["http://good/v1"]))).toEqual([]);
    expect(asked).toEqual([]);
    expect(await serving.checkUsage(declared(["http://good/v1", "http://bare/v1"]))).toHaveLength(1);
    expect(asked).toHaveLength(2);
  });
});

describe("UpstreamEngine's settling of a stream the client leaves", () => {
  it("charges the prompt's estimate and a token a chunk read, not nothing", async () => {
    // Three chunks of text, then an upstream still generating.
    const encoder = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const text of ["A", "B", "C"]) {
          controller.enqueue(encoder.encode(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: text } }] })}\n\n`));
        }
      },
    });
    const engine = new UpstreamEngine(models, { timeouts, transport: async () => new Response(body) });
    const settled: Array<{ promptTokens: number; completionTokens: number }> = [];
    const admitted: number[] = [];
    const stream = await engine.chat(request, {
      signal: new AbortController().signal,
      admit: async (size) => {
        admitted.push(size.promptTokens);
        return { maxOutputTokens: size.maxOutputTokens, settle: (usage) => settled.push(usage) };
      },
    });
    expect(await stream.next()).toMatchObject({ value: { type: "text", text: "A" } });
    expect(await stream.next()).toMatchObject({ value: { type: "text", text: "B" } });
    await stream.return();
    expect(settled).toEqual([{ promptTokens: admitted[0], completionTokens: 2 }]);
    expect(admitted[0]).toBeGreaterThan(0);
    expect(engine.pools.get("remote")!.endpoints[0]!.inFlight).toBe(0);
  });
});

describe("UpstreamEngine's active health checks", () => {
  /** An upstream whose GET /models fails while `failing`, and whose chat completions are counted and answered (or fail, `chatFails`). */
  function upstream() {
    const state = { failing: true, chatFails: false, chats: 0 };
    const fetch: typeof globalThis.fetch = async (input) => {
      if (String(input).endsWith("/models")) return new Response("{}", { status: state.failing ? 500 : 200 });
      state.chats++;
      if (state.chatFails) throw new TypeError("fetch failed");
      return sseReply();
    };
    return { state, fetch };
  }

  afterEach(() => {
    vi.useRealTimers();
  });

  // The pool's passive time out is 5 s (doubling): past it, an endpoint its failed requests took
  // out gets one request to try it again. An endpoint its checks say is down must not: a hung one
  // would make that request wait the first-byte timeout (60 s by default) before another endpoint.
  it("keeps an endpoint whose checks fail out of its pool past the passive time out, until a check passes", async () => {
    vi.useFakeTimers();
    const { state, fetch } = upstream();
    const engine = new UpstreamEngine(models, { timeouts, transport: fetch });
    const endpoint = engine.pools.get("remote")!.endpoints[0]!;
    engine.checkHealth(1_000);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(endpoint.down).toBe(true);
    // 30 s of failed checks: six passive time outs' worth.
    await vi.advanceTimersByTimeAsync(30_000);
    await expect(engine.chat(request, { signal: new AbortController().signal })).rejects.toMatchObject({ code: "overloaded" });
    expect(state.chats).toBe(0);
    state.failing = false;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(endpoint.down).toBe(false);
    await engine.chat(request, { signal: new AbortController().signal });
    expect(state.chats).toBe(1);
    await engine.close();
  });

  it("takes out an endpoint whose answer to a check is cut while its body is read, and goes on checking", async () => {
    vi.useFakeTimers();
    let checks = 0;
    // Headers come; the body fails (a connection reset, or a reply over the transport's bound).
    const cut: UpstreamTransport = async () => {
      checks++;
      return { ok: true, status: 200, body: null, text: () => Promise.reject(new Error("socket hang up")), json: async () => ({}) };
    };
    const engine = new UpstreamEngine(models, { timeouts, transport: cut });
    engine.checkHealth(1_000);
    await vi.advanceTimersByTimeAsync(3_500);
    expect(engine.pools.get("remote")!.endpoints[0]!.down).toBe(true);
    expect(checks).toBe(3);
    await engine.close();
  });

  it("keeps out an endpoint that failed requests took out, once its checks fail too", async () => {
    vi.useFakeTimers();
    const { state, fetch } = upstream();
    state.failing = false;
    state.chatFails = true;
    const engine = new UpstreamEngine(models, { timeouts, transport: fetch });
    const endpoint = engine.pools.get("remote")!.endpoints[0]!;
    // 3 failed requests in a row take it out (passively); then its checks start failing.
    for (let i = 0; i < 3; i++) await expect(engine.chat(request, { signal: new AbortController().signal })).rejects.toThrow();
    expect(endpoint.down).toBe(true);
    state.failing = true;
    engine.checkHealth(1_000);
    await vi.advanceTimersByTimeAsync(30_000);
    await expect(engine.chat(request, { signal: new AbortController().signal })).rejects.toMatchObject({ code: "overloaded" });
    expect(state.chats).toBe(3);
    await engine.close();
  });
});
