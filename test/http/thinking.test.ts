import { Ollama, type ChatResponse, type Message } from "ollama";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testVocabulary } from "../../src/testmodels/testVocabulary.js";
import { TEST_MODEL_THOUGHT } from "../../src/testmodels/thoughtWiring.js";
import { postJson, readSseEvents, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

// Thinking models, through the official clients against the real server. `think` is the generated
// model whose Qwen3-style template has a `<think>…</think>` section and whose weights write the
// thought "The river was there" at the start of every reply, then random text; `tiny` has no
// thought section.

type RawMessage = { content: string | null; reasoning_content?: string };
type RawDelta = { content?: string; reasoning_content?: string };

const question = [{ role: "user" as const, content: "How far is the river?" }];
const greedy = { temperature: 0, max_tokens: 16 };

describe("thinking models", () => {
  let server: TestServer;
  let client: OpenAI;
  let ollama: Ollama;

  beforeAll(async () => {
    server = await startTestServer({ models: { think: await testModelPath("think-tiny"), tiny: await testModelPath("tiny") } });
    client = server.client;
    ollama = new Ollama({ host: server.url });
  });
  afterAll(() => server?.close());

  async function complete(body: Partial<OpenAI.ChatCompletionCreateParamsNonStreaming> & Record<string, unknown>) {
    const completion = await client.chat.completions.create({
      model: "think",
      messages: question,
      ...greedy,
      ...body,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    return { completion, message: completion.choices[0]!.message as unknown as RawMessage };
  }

  it("returns the thought apart from the answer, as reasoning_content (chat completions)", async () => {
    const { completion, message } = await complete({});
    expect(message.reasoning_content).toBe(TEST_MODEL_THOUGHT);
    expect(message.content).toMatch(/\S/);
    expect(message.content).not.toMatch(/<\/?think>/);
    // The thought's tokens count as completion tokens: 16 in all, the thought and its markers
    // (<think>, The, river, was, there, </think>) among them.
    expect(completion.usage?.completion_tokens).toBe(16);
    expect(completion.usage?.completion_tokens_details).toEqual({ reasoning_tokens: 6 });
    expect(completion.choices[0]!.finish_reason).toBe("length");
  });

  it("streams reasoning_content deltas, all before the first content delta, adding up to the same reply", async () => {
    const { message } = await complete({});
    const stream = await client.chat.completions.create({
      model: "think",
      messages: question,
      ...greedy,
      stream: true,
      stream_options: { include_usage: true },
    });
    const deltas: RawDelta[] = [];
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      if (chunk.choices[0]) deltas.push(chunk.choices[0].delta as RawDelta);
      usage ??= chunk.usage;
    }
    expect(usage?.completion_tokens_details).toEqual({ reasoning_tokens: 6 });
    const firstContent = deltas.findIndex((delta) => delta.content);
    const lastReasoning = deltas.findLastIndex((delta) => delta.reasoning_content);
    expect(lastReasoning).toBeGreaterThan(0);
    expect(lastReasoning).toBeLessThan(firstContent);
    // Token by token: the thought comes in several pieces.
    expect(deltas.filter((delta) => delta.reasoning_content).length).toBeGreaterThan(2);
    expect(deltas.map((delta) => delta.reasoning_content ?? "").join("")).toBe(message.reasoning_content);
    expect(deltas.map((delta) => delta.content ?? "").join("")).toBe(message.content);
  });

  it("raw SSE: reasoning_content chunks carry no content key", async () => {
    const response = await postJson(`${server.url}/v1/chat/completions`, { model: "think", messages: question, ...greedy, stream: true });
    const chunks = (await readSseEvents(response))
      .filter((data) => data !== "[DONE]")
      .map((data) => JSON.parse(data) as { choices: Array<{ delta: RawDelta }> });
    const reasoning = chunks.filter((chunk) => chunk.choices[0]?.delta.reasoning_content !== undefined);
    expect(reasoning.length).toBeGreaterThan(0);
    for (const chunk of reasoning) expect(chunk.choices[0]!.delta).toEqual({ reasoning_content: expect.any(String) });
  });

  it("a reply cut off inside the thought is all reasoning_content, finish_reason length", async () => {
    const { completion, message } = await complete({ max_tokens: 3 });
    expect(message.reasoning_content).toBe("The river");
    expect(message.content).toBe("");
    expect(completion.choices[0]!.finish_reason).toBe("length");
  });

  it('reasoning_effort "none" turns thinking off: no reasoning_content; other levels leave it on', async () => {
    const off = await complete({ reasoning_effort: "none" });
    expect(off.message.reasoning_content).toBeUndefined();
    expect(off.message.content).toMatch(/\S/);
    expect(off.message.content).not.toContain("think>");
    expect(off.message.content).not.toContain(TEST_MODEL_THOUGHT);
    // The empty thought written into the prompt is prompt, not completion.
    const on = await complete({});
    expect(off.completion.usage!.prompt_tokens).toBeGreaterThan(on.completion.usage!.prompt_tokens);
    for (const effort of ["low", "high"] as const) {
      expect((await complete({ reasoning_effort: effort })).message.reasoning_content).toBe(TEST_MODEL_THOUGHT);
    }
  });

  it("a model without a thought section ignores reasoning_effort", async () => {
    const plain = await complete({ model: "tiny" });
    const none = await complete({ model: "tiny", reasoning_effort: "none" });
    expect(plain.message.reasoning_content).toBeUndefined();
    expect(plain.completion.usage).not.toHaveProperty("completion_tokens_details");
    expect(none.message).toEqual(plain.message);
  });

  it("a tool call opened after the thought: the thought stays apart and the call is well formed", async () => {
    // +30 on `<tool_call>` (whose logit is otherwise 0) beats every free-text token (about 25 at
    // most) but not the thought's own chain (about 58): the model thinks first, then opens a call,
    // which continues after the thought as the model wrote it.
    const toolCallToken = testVocabulary().tokens.indexOf("<tool_call>");
    const parameters = {
      type: "object",
      properties: { city: { type: "string", maxLength: 8 } },
      required: ["city"],
      additionalProperties: false,
    };
    const { completion, message } = await complete({
      max_tokens: 400,
      tools: [{ type: "function", function: { name: "get_weather", parameters } }],
      logit_bias: { [toolCallToken]: 30 },
      parallel_tool_calls: false,
    });
    expect(message.reasoning_content).toBe(TEST_MODEL_THOUGHT);
    expect(message.content).toBeNull();
    expect(completion.choices[0]!.finish_reason).toBe("tool_calls");
    const call = completion.choices[0]!.message.tool_calls![0]!;
    expect(call.type === "function" && call.function.name).toBe("get_weather");
    expect(call.type === "function" && JSON.parse(call.function.arguments)).toEqual({ city: expect.any(String) });
  });

  it("past thoughts sent back in the history are accepted and left out of the prompt", async () => {
    const first = await complete({});
    const history = (reasoning: string | undefined) => [
      ...question,
      { role: "assistant", content: first.message.content, ...(reasoning === undefined ? {} : { reasoning_content: reasoning }) },
      { role: "user", content: "And the bridge?" },
    ];
    const withThought = await complete({ messages: history(first.message.reasoning_content) as never });
    const without = await complete({ messages: history(undefined) as never });
    expect(withThought.completion.usage!.prompt_tokens).toBe(without.completion.usage!.prompt_tokens);
    expect(withThought.message).toEqual(without.message);
  });

  describe("native API (ollama client)", () => {
    const messages: Message[] = question;
    const options = { temperature: 0, num_predict: 16 };

    it("returns message.thinking by default, with think true and with an effort level", async () => {
      const base = await ollama.chat({ model: "think", messages, options });
      expect(base.message.thinking).toBe(TEST_MODEL_THOUGHT);
      expect(base.message.content).toMatch(/\S/);
      expect(base.message.content).not.toMatch(/<\/?think>/);
      for (const think of [true, "high"] as const)
        expect((await ollama.chat({ model: "think", messages, options, think })).message).toEqual(base.message);
    });

    it("streams the thought in message.thinking chunks before the content", async () => {
      const whole = await ollama.chat({ model: "think", messages, options, think: true });
      const chunks: ChatResponse[] = [];
      for await (const chunk of await ollama.chat({ model: "think", messages, options, think: true, stream: true })) chunks.push(chunk);
      const firstContent = chunks.findIndex((chunk) => chunk.message.content);
      const lastThinking = chunks.findLastIndex((chunk) => chunk.message.thinking);
      expect(lastThinking).toBeGreaterThan(0);
      expect(lastThinking).toBeLessThan(firstContent);
      expect(chunks.map((chunk) => chunk.message.thinking ?? "").join("")).toBe(whole.message.thinking);
      expect(chunks.map((chunk) => chunk.message.content).join("")).toBe(whole.message.content);
      expect(chunks.at(-1)?.done).toBe(true);
    });

    it("think false: no thinking", async () => {
      const reply = await ollama.chat({ model: "think", messages, options, think: false });
      expect(reply.message.thinking).toBeUndefined();
      expect(reply.message.content).toMatch(/\S/);
      expect(reply.message.content).not.toContain(TEST_MODEL_THOUGHT);
    });

    it("generate returns the thought in `thinking`, streamed and not", async () => {
      const reply = await ollama.generate({ model: "think", prompt: "How far is the river?", options });
      expect(reply.thinking).toBe(TEST_MODEL_THOUGHT);
      expect(reply.response).toMatch(/\S/);
      let thinking = "";
      for await (const chunk of await ollama.generate({ model: "think", prompt: "How far is the river?", options, stream: true }))
        thinking += chunk.thinking ?? "";
      expect(thinking).toBe(TEST_MODEL_THOUGHT);
      expect((await ollama.generate({ model: "think", prompt: "How far is the river?", options, think: false })).thinking).toBeUndefined();
    });

    it("show lists the thinking capability for a template with a thought section only", async () => {
      expect((await ollama.show({ model: "think" })).capabilities).toEqual(["completion", "tools", "embedding", "thinking"]);
      expect((await ollama.show({ model: "tiny" })).capabilities).not.toContain("thinking");
    });

    it("a model without a thought section ignores think", async () => {
      const plain = await ollama.chat({ model: "tiny", messages, options });
      for (const think of [true, false, "low"] as const) {
        const reply = await ollama.chat({ model: "tiny", messages, options, think });
        expect(reply.message.thinking).toBeUndefined();
        expect(reply.message.content).toBe(plain.message.content);
      }
    });

    it("past thinking sent back in the history is accepted and left out of the prompt", async () => {
      const first = await ollama.chat({ model: "think", messages, options });
      const history = (thinking?: string): Message[] => [
        ...messages,
        { role: "assistant", content: first.message.content, ...(thinking === undefined ? {} : { thinking }) },
        { role: "user", content: "And the bridge?" },
      ];
      const withThought = await ollama.chat({ model: "think", messages: history(first.message.thinking), options });
      const without = await ollama.chat({ model: "think", messages: history(), options });
      expect(withThought.prompt_eval_count).toBe(without.prompt_eval_count);
      expect(withThought.message).toEqual(without.message);
    });
  });
});
