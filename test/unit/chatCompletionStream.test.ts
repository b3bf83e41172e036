import { describe, expect, it } from "vitest";
import { toChatCompletion } from "../../src/protocols/openai/toChatCompletion.js";
import { ChatCompletionStream } from "../../src/protocols/openai/ChatCompletionStream.js";
import { toOpenAIError } from "../../src/protocols/openai/toOpenAIError.js";
import { ServerError } from "../../src/core/ServerError.js";
import type { ChatEvent } from "../../src/core/ChatEvent.js";

const identity = { id: "chatcmpl-x", created: 1, model: "m" };
const usage = { promptTokens: 3, cachedTokens: 1, completionTokens: 2 };
const timings = { loadMs: 0, promptMs: 1, generationMs: 2 };
const of = (event: ChatEvent, choice = 0) => ({ prompt: 0, choice, event });

describe("OpenAI translators", () => {
  it("streams a role chunk, content deltas and a finish chunk, with usage only when asked", () => {
    const stream = new ChatCompletionStream({ ...identity, includeUsage: true });
    expect(stream.start()).toEqual([]);
    const [role, hi] = stream.next(of({ type: "text", text: "hi" }));
    expect(role).toEqual({
      id: "chatcmpl-x",
      object: "chat.completion.chunk",
      created: 1,
      model: "m",
      choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null, logprobs: null }],
      usage: null,
    });
    expect(hi?.choices[0]?.delta).toEqual({ content: "hi" });
    const end = stream.next(of({ type: "done", finishReason: "length", usage, timings }));
    expect(end).toHaveLength(1);
    expect(end[0]?.choices[0]).toEqual({ index: 0, delta: {}, finish_reason: "length", logprobs: null });
    expect(stream.end()).toMatchObject([{ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } }]);

    const without = new ChatCompletionStream({ ...identity, includeUsage: false });
    const plainEnd = without.next(of({ type: "done", finishReason: "stop", usage, timings }));
    expect(plainEnd).toHaveLength(2);
    expect(plainEnd[1]).not.toHaveProperty("usage");
    expect(without.end()).toEqual([]);
  });

  it("counts each prompt once and every completion in the usage chunk", () => {
    const stream = new ChatCompletionStream({ ...identity, includeUsage: true });
    for (const [prompt, choice] of [
      [0, 0],
      [0, 1],
      [1, 2],
    ] as const)
      stream.next({ prompt, choice, event: { type: "done", finishReason: "stop", usage, timings } });
    expect(stream.end()[0]?.usage).toMatchObject({ prompt_tokens: 6, completion_tokens: 6, total_tokens: 12 });
  });

  it("opens a choice that begins with a call with the role in the call's first chunk, and no content", () => {
    const chunks = new ChatCompletionStream({ ...identity, includeUsage: false });
    const events: ChatEvent[] = [
      { type: "tool_call_start", index: 0, name: "get_weather" },
      { type: "tool_call_arguments", index: 0, text: '{"city":"Paris"}' },
      { type: "tool_call_start", index: 1, name: "add" },
      { type: "done", finishReason: "tool_calls", usage, timings },
    ];
    const streamed = events.flatMap((event) => chunks.next(of(event)));
    expect(streamed.map((chunk) => chunk.choices[0]?.delta)).toEqual([
      {
        role: "assistant",
        tool_calls: [
          {
            index: 0,
            id: expect.stringMatching(/^call_[A-Za-z0-9]{24}$/),
            type: "function",
            function: { name: "get_weather", arguments: "" },
          },
        ],
      },
      { tool_calls: [{ index: 0, function: { arguments: '{"city":"Paris"}' } }] },
      {
        tool_calls: [
          { index: 1, id: expect.stringMatching(/^call_[A-Za-z0-9]{24}$/), type: "function", function: { name: "add", arguments: "" } },
        ],
      },
      {},
    ]);
    expect(streamed.some((chunk) => "content" in chunk.choices[0]!.delta)).toBe(false);
    // The engine names calls by index only; each gets its own id here.
    const ids = streamed.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls?.map((call) => call.id) ?? []).filter(Boolean);
    expect(new Set(ids).size).toBe(2);
  });

  it("opens a choice that begins with text, a thought or nothing with the role-only chunk, once per choice", () => {
    const chunks = new ChatCompletionStream({ ...identity, includeUsage: true });
    expect(chunks.next(of({ type: "text", text: "Hi" })).map((chunk) => chunk.choices[0]?.delta)).toEqual([
      { role: "assistant", content: "" },
      { content: "Hi" },
    ]);
    expect(chunks.next(of({ type: "text", text: "!" })).map((chunk) => chunk.choices[0]?.delta)).toEqual([{ content: "!" }]);
    expect(chunks.next(of({ type: "thinking", text: "Hm" }, 1)).map((chunk) => chunk.choices[0]?.delta)).toEqual([
      { role: "assistant", content: "" },
      { reasoning_content: "Hm" },
    ]);
    expect(chunks.next(of({ type: "done", finishReason: "length", usage, timings }, 2)).map((chunk) => chunk.choices[0])).toEqual([
      { index: 2, delta: { role: "assistant", content: "" }, finish_reason: null, logprobs: null },
      { index: 2, delta: {}, finish_reason: "length", logprobs: null },
    ]);
    // A call after text: the role was given already.
    expect(chunks.next(of({ type: "tool_call_start", index: 0, name: "f" }))[0]?.choices[0]?.delta).toEqual({
      tool_calls: [
        { index: 0, id: expect.stringMatching(/^call_[A-Za-z0-9]{24}$/), type: "function", function: { name: "f", arguments: "" } },
      ],
    });
  });

  it("builds the non-streamed reply", async () => {
    async function* events(): AsyncGenerator<ChatEvent> {
      yield { type: "text", text: "hel" };
      yield { type: "text", text: "lo" };
      yield { type: "done", finishReason: "stop", usage, timings };
    }
    expect(await toChatCompletion(identity, [events()])).toEqual({
      id: "chatcmpl-x",
      object: "chat.completion",
      created: 1,
      model: "m",
      choices: [{ index: 0, message: { role: "assistant", content: "hello", refusal: null }, finish_reason: "stop", logprobs: null }],
      usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, prompt_tokens_details: { cached_tokens: 1 } },
    });
  });

  it("returns the thought apart from the answer, as reasoning_content, streamed and not; none when there was none", async () => {
    const events: ChatEvent[] = [
      { type: "thinking", text: "Let me" },
      { type: "thinking", text: " see." },
      { type: "text", text: "Four." },
      { type: "done", finishReason: "stop", usage: { ...usage, reasoningTokens: 1 }, timings },
    ];
    const stream = new ChatCompletionStream({ ...identity, includeUsage: false });
    const streamed = events.flatMap((event) => stream.next(of(event))).slice(1);
    expect(streamed.slice(0, 3).map((chunk) => chunk.choices[0]?.delta)).toEqual([
      { reasoning_content: "Let me" },
      { reasoning_content: " see." },
      { content: "Four." },
    ]);
    const whole = await toChatCompletion(identity, [
      (async function* () {
        yield* events;
      })(),
    ]);
    expect(whole.choices[0]?.message).toEqual({ role: "assistant", content: "Four.", reasoning_content: "Let me see.", refusal: null });
    expect(whole.usage.completion_tokens_details).toEqual({ reasoning_tokens: 1 });
  });

  it("shapes errors as {error:{message,type,param,code}} and hides internals", () => {
    expect(toOpenAIError(new ServerError("model_not_found", { model: "x", param: "model" }))).toEqual({
      error: {
        message: "The model `x` does not exist or you do not have access to it.",
        type: "invalid_request_error",
        param: "model",
        code: "model_not_found",
      },
    });
    const internal = toOpenAIError(new ServerError("internal_error", { cause: new Error("/secret/path failed") }));
    expect(internal).toEqual({
      error: { message: "The server had an error while processing your request.", type: "server_error", param: null, code: null },
    });
  });
});
