import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_MODEL_THOUGHT } from "../../src/testmodels/thoughtWiring.js";
import { wholePrompt } from "../support/anthropicUsage.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

// Thinking models on the Messages API: `think` is the generated model whose template has a
// `<think>…</think>` section and whose weights write the thought "The river was there" first.
// The thought comes back as a `thinking` block before the text; `thinking: {type: "disabled"}`
// turns it off. (temperature is sent through a variable: the SDK's types no longer declare it.)

const request = { model: "think", max_tokens: 16, temperature: 0, messages: [{ role: "user" as const, content: "How far is the river?" }] };

describe("thinking models on the Messages API", () => {
  let server: TestServer;
  let client: Anthropic;

  beforeAll(async () => {
    server = await startTestServer({ models: { think: await testModelPath("think-tiny") } });
    client = new Anthropic({ baseURL: server.url, apiKey: "local", maxRetries: 0 });
  });
  afterAll(() => server?.close());

  it("returns the thought as a thinking block (with a signature field) before the text block", async () => {
    const reply = await client.messages.create(request);
    expect(reply.content.map((block) => block.type)).toEqual(["thinking", "text"]);
    expect(reply.content[0]).toEqual({ type: "thinking", thinking: TEST_MODEL_THOUGHT, signature: "" });
    const text = reply.content[1] as Anthropic.TextBlock;
    expect(text.text).toMatch(/\S/);
    expect(text.text).not.toMatch(/<\/?think>|The river was there/);
    // The thought's tokens are output tokens: 16 in all, and said apart.
    expect(reply.usage.output_tokens).toBe(16);
    expect(reply.usage.output_tokens_details?.thinking_tokens).toBeGreaterThan(3);
    expect(reply.usage.output_tokens_details?.thinking_tokens).toBeLessThan(16);
    expect(reply.stop_reason).toBe("max_tokens");
  });

  it("streams thinking_delta, then signature_delta, then the text block; .stream() adds up to the same message", async () => {
    const plain = await client.messages.create(request);
    const response = await postJson(`${server.url}/v1/messages`, { ...request, stream: true });
    const events = (await response.text())
      .split("\n\n")
      .filter((block) => block !== "")
      .map(
        (block) =>
          JSON.parse(block.slice(block.indexOf("\ndata: ") + "\ndata: ".length)) as Anthropic.RawMessageStreamEvent | { type: "ping" },
      );
    type BlockEvent = Anthropic.RawContentBlockStartEvent | Anthropic.RawContentBlockDeltaEvent | Anthropic.RawContentBlockStopEvent;
    const blockEvents = events.filter((event): event is BlockEvent => event.type.startsWith("content_block"));
    const kinds = blockEvents.map((event) =>
      event.type === "content_block_start"
        ? `start:${event.content_block.type}`
        : event.type === "content_block_delta"
          ? event.delta.type
          : "stop",
    );
    // One thinking block (index 0), its signature last, then one text block (index 1).
    const firstText = kinds.indexOf("start:text");
    expect(kinds[0]).toBe("start:thinking");
    expect(new Set(kinds.slice(1, firstText - 2))).toEqual(new Set(["thinking_delta"]));
    expect(kinds.slice(firstText - 2, firstText)).toEqual(["signature_delta", "stop"]);
    expect(new Set(kinds.slice(firstText + 1, -1))).toEqual(new Set(["text_delta"]));
    expect(kinds.at(-1)).toBe("stop");
    blockEvents.forEach((event, i) => expect(event.index).toBe(i < firstText ? 0 : 1));

    const stream = client.messages.stream(request);
    let thought = "";
    stream.on("thinking", (delta) => (thought += delta));
    const final = await stream.finalMessage();
    expect(thought).toBe(TEST_MODEL_THOUGHT);
    expect(final.content).toEqual(plain.content);
  });

  it('thinking {type: "disabled"} turns it off: no thinking block; count_tokens counts the prompt that way too', async () => {
    const disabled = { ...request, thinking: { type: "disabled" as const } };
    const off = await client.messages.create(disabled);
    expect(off.content.map((block) => block.type)).toEqual(["text"]);
    expect((off.content[0] as Anthropic.TextBlock).text).not.toContain(TEST_MODEL_THOUGHT);
    const on = await client.messages.create({ ...request, thinking: { type: "enabled", budget_tokens: 1024 } });
    expect(on.content[0]?.type).toBe("thinking");
    // The empty thought written into the prompt is prompt, not output.
    expect(wholePrompt(off.usage)).toBeGreaterThan(wholePrompt(on.usage));
    expect(
      (await client.messages.countTokens({ model: "think", messages: request.messages, thinking: { type: "disabled" } })).input_tokens,
    ).toBe(wholePrompt(off.usage));
  });

  it("continues a prefill as answer: no thinking block, and thinking disabled writes no empty thought after it", async () => {
    const messages: Anthropic.MessageParam[] = [...request.messages, { role: "assistant", content: "It is" }];
    const reply = await client.messages.create({ ...request, messages });
    expect(reply.content.map((block) => block.type)).toEqual(["text"]);
    const count = async (thinking: Anthropic.ThinkingConfigParam) =>
      (await client.messages.countTokens({ model: "think", messages, thinking })).input_tokens;
    expect(await count({ type: "disabled" })).toBe(await count({ type: "enabled", budget_tokens: 1024 }));
    const off = await client.messages.create({ ...request, messages, thinking: { type: "disabled" } });
    expect(off.content).toEqual(reply.content);
  });

  it("accepts the thinking block sent back in the conversation", async () => {
    const first = await client.messages.create(request);
    const reply = await client.messages.create({
      ...request,
      messages: [
        ...request.messages,
        { role: "assistant", content: first.content as Anthropic.ContentBlockParam[] },
        { role: "user", content: "And then?" },
      ],
    });
    expect(reply.content[0]).toMatchObject({ type: "thinking", thinking: TEST_MODEL_THOUGHT });
  });
});
