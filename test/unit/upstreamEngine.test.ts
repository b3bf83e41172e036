import { describe, expect, it } from "vitest";
import { fromChatCompletionRequest } from "../../src/protocols/openai/fromChatCompletionRequest.js";
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
const timeouts = { firstByteMs: 5_000, idleMs: 5_000 };

describe("UpstreamEngine's hold on an endpoint", () => {
  it("gives the endpoint back when the stream is returned before its first event is read", async () => {
    const engine = new UpstreamEngine(models, { timeouts, fetch: async () => sseReply() });
    const endpoint = engine.pools.get("remote")!.endpoints[0]!;
    const stream = await engine.chat(request, { signal: new AbortController().signal });
    expect(endpoint.inFlight).toBe(1);
    await stream.return();
    expect(endpoint.inFlight).toBe(0);
    expect(endpoint.down).toBe(false);
  });

  it("reads a whole stream into events, with the upstream's usage, and gives the endpoint back", async () => {
    const engine = new UpstreamEngine(models, { timeouts, fetch: async () => sseReply() });
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
    const engine = new UpstreamEngine(models, { timeouts, fetch: hanging });
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
