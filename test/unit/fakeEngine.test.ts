// The tests' fake engine keeps the Engine contract the real one keeps: admission before any work,
// the ticket settled exactly once with what was used, however the request ends.
import { describe, expect, it } from "vitest";
import type { ChatEvent } from "../../src/core/ChatEvent.js";
import type { AdmissionRequest } from "../../src/core/Engine.js";
import { chatRequest, FakeEngine } from "../support/fakeEngine.js";

/** An admission that grants at most `cap` output tokens and records what it was asked and settled. */
function admission(cap = Infinity) {
  const asked: AdmissionRequest[] = [];
  const settled: Array<{ promptTokens: number; completionTokens: number }> = [];
  const admit = async (wanted: AdmissionRequest) => {
    asked.push(wanted);
    return {
      maxOutputTokens: Math.min(cap, wanted.maxOutputTokens),
      settle: (usage: (typeof settled)[number]) => void settled.push(usage),
    };
  };
  return { admit, asked, settled };
}

async function drain(stream: AsyncIterable<ChatEvent>): Promise<ChatEvent[]> {
  const events: ChatEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

describe("FakeEngine", () => {
  it("asks admission for the prompt and the cap, stops at the cap granted, and settles once with what it generated", async () => {
    const engine = new FakeEngine({ reply: { text: "one two three four five" } });
    const { admit, asked, settled } = admission(3);
    const events = await drain(await engine.chat(chatRequest({ maxTokens: 10 }), { signal: new AbortController().signal, admit }));
    const prompt = "user: hi\nassistant: ".length;
    expect(asked).toEqual([{ promptTokens: prompt, maxOutputTokens: 10 }]);
    expect(events.filter((event) => event.type === "text").map((event) => event.text)).toEqual(["one", " two", " three"]);
    expect(events.at(-1)).toMatchObject({ type: "done", finishReason: "length", usage: { promptTokens: prompt, completionTokens: 3 } });
    expect(settled).toEqual([{ promptTokens: prompt, completionTokens: 3 }]);
    expect((await engine.renderPrompt(chatRequest(), { signal: new AbortController().signal })).tokenCount).toBe(prompt);
  });

  it("ends a stream whose request is aborted, and settles what it had generated", async () => {
    const engine = new FakeEngine({ reply: { text: "word ".repeat(100) } });
    const { admit, settled } = admission();
    const controller = new AbortController();
    const stream = await engine.chat(chatRequest(), { signal: controller.signal, admit });
    await stream.next();
    await stream.next();
    controller.abort(new Error("client gone"));
    await expect(drain(stream)).resolves.toEqual([]);
    expect(settled).toEqual([{ promptTokens: expect.any(Number), completionTokens: 2 }]);
    expect(engine.status().loaded).toEqual([expect.objectContaining({ id: "fake", active: 0 })]);
  });

  it("reserves n × the cap for n choices and settles the prompt once with every choice's tokens", async () => {
    const engine = new FakeEngine({ reply: { text: "a b c d" } });
    const { admit, asked, settled } = admission();
    const streams = await engine.chatChoices(chatRequest({ n: 3, maxTokens: 2 }), { signal: new AbortController().signal, admit });
    expect(asked[0]?.maxOutputTokens).toBe(6);
    for (const stream of streams) await drain(stream);
    expect(settled).toEqual([{ promptTokens: asked[0]!.promptTokens, completionTokens: 6 }]);
  });

  it("ends at a stop sequence, without it", async () => {
    const engine = new FakeEngine({ reply: { text: "alpha beta gamma" } });
    const events = await drain(await engine.chat(chatRequest({ stop: ["gam"] }), { signal: new AbortController().signal }));
    expect(events.filter((event) => event.type === "text").map((event) => event.text)).toEqual(["alpha", " beta", " "]);
    expect(events.at(-1)).toMatchObject({ type: "done", finishReason: "stop", stopSequence: "gam" });
  });

  it("refuses unknown models, wrong capabilities and calls after close, as LlamaEngine does", async () => {
    const engine = new FakeEngine({ models: ["fake", { id: "ranker", capabilities: ["rerank"] }] });
    const signal = new AbortController().signal;
    await expect(engine.chat(chatRequest({ model: "nope" }), { signal })).rejects.toMatchObject({ code: "model_not_found" });
    await expect(engine.chat(chatRequest({ model: "ranker" }), { signal })).rejects.toMatchObject({ code: "invalid_request" });
    await expect(engine.rerank({ model: "fake", query: "q", documents: ["d"] }, { signal })).rejects.toMatchObject({
      code: "invalid_request",
    });
    await engine.close();
    await expect(engine.chat(chatRequest(), { signal })).rejects.toMatchObject({ code: "engine_unavailable" });
  });

  it("settles a failing call's admission, and an embedding's with the tokens of its inputs", async () => {
    const failing = new FakeEngine({ failures: { tokenize: new Error("tokenizing failed") } });
    const refused = admission();
    const signal = new AbortController().signal;
    const tokenize = { model: "fake", content: "hi", addSpecial: false, parseSpecial: false, withPieces: false };
    await expect(failing.tokenize(tokenize, { signal, admit: refused.admit })).rejects.toThrow("tokenizing failed");
    expect(refused.settled).toEqual([{ promptTokens: 0, completionTokens: 0 }]);

    const engine = new FakeEngine();
    const embedded = admission();
    const result = await engine.embed({ model: "fake", inputs: ["héllo", [1, 2, 3]], truncate: false }, { signal, admit: embedded.admit });
    expect(result.promptTokens).toBe(9);
    expect(result.vectors.map((vector) => Math.hypot(...vector))).toEqual([expect.closeTo(1, 5), expect.closeTo(1, 5)]);
    expect(embedded.asked).toEqual([{ promptTokens: 9, maxOutputTokens: 0 }]);
    expect(embedded.settled).toEqual([{ promptTokens: 9, completionTokens: 0 }]);
    expect((await engine.detokenize({ model: "fake", tokens: [...Buffer.from("héllo")] }, { signal })).content).toBe("héllo");
    await expect(engine.detokenize({ model: "fake", tokens: [300] }, { signal })).rejects.toMatchObject({ code: "invalid_request" });
  });
});
