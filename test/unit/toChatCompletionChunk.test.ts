import { describe, expect, it } from "vitest";
import { toChatCompletion } from "../../src/protocols/openai/toChatCompletion.js";
import { toChatCompletionChunk, toRoleChunk, toUsageChunk } from "../../src/protocols/openai/toChatCompletionChunk.js";
import { toOpenAIError } from "../../src/protocols/openai/toOpenAIError.js";
import { ServerError } from "../../src/core/ServerError.js";
import type { ChatEvent } from "../../src/core/ChatEvent.js";

const identity = { id: "chatcmpl-x", created: 1, model: "m" };
const usage = { promptTokens: 3, cachedTokens: 1, completionTokens: 2 };
const timings = { loadMs: 0, promptMs: 1, generationMs: 2 };

describe("OpenAI translators", () => {
  it("streams a role chunk, content deltas and a finish chunk, with usage only when asked", () => {
    const withUsage = { ...identity, includeUsage: true };
    expect(toRoleChunk(withUsage)).toEqual({
      id: "chatcmpl-x",
      object: "chat.completion.chunk",
      created: 1,
      model: "m",
      choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null, logprobs: null }],
      usage: null,
    });
    expect(toChatCompletionChunk(withUsage, { type: "text", text: "hi" })[0]?.choices[0]?.delta).toEqual({ content: "hi" });
    const end = toChatCompletionChunk(withUsage, { type: "done", finishReason: "length", usage, timings });
    expect(end).toHaveLength(1);
    expect(end[0]?.choices[0]).toEqual({ index: 0, delta: {}, finish_reason: "length", logprobs: null });
    expect(toUsageChunk(withUsage, usage)).toMatchObject({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } });

    const without = { ...identity, includeUsage: false };
    const plainEnd = toChatCompletionChunk(without, { type: "done", finishReason: "stop", usage, timings });
    expect(plainEnd).toHaveLength(1);
    expect(plainEnd[0]).not.toHaveProperty("usage");
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
    const streamed = events.flatMap((event) => toChatCompletionChunk({ ...identity, includeUsage: false }, event));
    expect(streamed.slice(0, 3).map((chunk) => chunk.choices[0]?.delta)).toEqual([{ reasoning_content: "Let me" }, { reasoning_content: " see." }, { content: "Four." }]);
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
      error: { message: "The model `x` does not exist or you do not have access to it.", type: "invalid_request_error", param: "model", code: "model_not_found" },
    });
    const internal = toOpenAIError(new ServerError("internal_error", { cause: new Error("/secret/path failed") }));
    expect(internal).toEqual({ error: { message: "The server had an error while processing your request.", type: "server_error", param: null, code: null } });
  });
});
