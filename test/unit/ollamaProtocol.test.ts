import { describe, expect, it } from "vitest";
import type { ChatEvent } from "../../src/core/ChatEvent.js";
import { nameCandidates, withTag } from "../../src/core/modelName.js";
import { ServerError } from "../../src/core/ServerError.js";
import { fromChatRequest, fromEmbedRequest, fromGenerateRequest, fromModelRequest } from "../../src/protocols/ollama/fromNativeRequest.js";
import { parseKeepAlive } from "../../src/protocols/ollama/parseKeepAlive.js";
import { formatParameterCount } from "../../src/core/formatParameterCount.js";
import { toNativeReply } from "../../src/protocols/ollama/toNativeReply.js";
import { NativeReplyStream } from "../../src/protocols/ollama/NativeReplyStream.js";
import { toOllamaError } from "../../src/protocols/ollama/toOllamaError.js";

const context = { kind: "chat" as const, model: "m", elapsedMs: () => 12.5, now: () => new Date("2025-01-02T03:04:05.678Z") };
const done: ChatEvent = {
  type: "done",
  finishReason: "tool_calls",
  usage: { promptTokens: 10, cachedTokens: 0, completionTokens: 4 },
  timings: { loadMs: 0, promptMs: 1.5, generationMs: 3.25 },
};

describe("native protocol translators", () => {
  it("parses keep_alive as seconds or a Go duration; negative is forever; no unit is refused", () => {
    expect(parseKeepAlive(undefined)).toBeUndefined();
    expect(parseKeepAlive(0)).toBe(0);
    expect(parseKeepAlive("0")).toBe(0);
    expect(parseKeepAlive(30)).toBe(30_000);
    expect(parseKeepAlive("5m")).toBe(300_000);
    expect(parseKeepAlive("1h30m")).toBe(5_400_000);
    expect(parseKeepAlive("1.5s")).toBe(1500);
    expect(parseKeepAlive(-1)).toBe(Infinity);
    expect(parseKeepAlive("-1m")).toBe(Infinity);
    for (const bad of ["300", "5 m", "m", "", "1d"]) expect(() => parseKeepAlive(bad)).toThrow(ServerError);
  });

  it("resolves name:tag with :latest implied, and ports are not tags", () => {
    expect(nameCandidates("qwen")).toEqual(["qwen", "qwen:latest"]);
    expect(nameCandidates("qwen:latest")).toEqual(["qwen:latest", "qwen"]);
    expect(nameCandidates("qwen:0.5b")).toEqual(["qwen:0.5b"]);
    expect(nameCandidates("localhost:5000/qwen")).toEqual(["localhost:5000/qwen", "localhost:5000/qwen:latest"]);
    expect(withTag("hf.co/a/b:Q4_K_M")).toBe("hf.co/a/b:Q4_K_M");
    expect(withTag("hf.co/a/b")).toBe("hf.co/a/b:latest");
  });

  it("writes parameter sizes as the reference server does", () => {
    expect(formatParameterCount(494_032_768)).toBe("494.03M");
    expect(formatParameterCount(3_212_749_888)).toBe("3.2B");
    expect(formatParameterCount(7_000_000_000)).toBe("7B");
    expect(formatParameterCount(158_000)).toBe("158K");
  });

  it("sends each tool call whole, arguments as an object, before the final object; every timing is sent, zero too (load_duration of a loaded model)", async () => {
    const events: ChatEvent[] = [
      { type: "text", text: "Hi" },
      { type: "tool_call_start", index: 0, name: "get_weather" },
      { type: "tool_call_arguments", index: 0, text: '{"city":' },
      { type: "tool_call_arguments", index: 0, text: '"Tokyo"}' },
      { type: "tool_call_start", index: 1, name: "now" },
      done,
    ];
    const stream = new NativeReplyStream(context);
    const chunks = events.flatMap((event) => stream.next(event));
    expect(chunks).toEqual([
      { model: "m", created_at: "2025-01-02T03:04:05.678Z", message: { role: "assistant", content: "Hi" }, done: false },
      {
        model: "m",
        created_at: "2025-01-02T03:04:05.678Z",
        message: {
          role: "assistant",
          content: "",
          tool_calls: [
            { id: expect.stringMatching(/^call_[a-z0-9]{8}$/), function: { index: 0, name: "get_weather", arguments: { city: "Tokyo" } } },
          ],
        },
        done: false,
      },
      {
        model: "m",
        created_at: "2025-01-02T03:04:05.678Z",
        message: {
          role: "assistant",
          content: "",
          tool_calls: [{ id: expect.stringMatching(/^call_[a-z0-9]{8}$/), function: { index: 1, name: "now", arguments: {} } }],
        },
        done: false,
      },
      {
        model: "m",
        created_at: "2025-01-02T03:04:05.678Z",
        message: { role: "assistant", content: "" },
        done: true,
        done_reason: "stop",
        total_duration: 12_500_000,
        load_duration: 0,
        prompt_eval_count: 10,
        prompt_eval_duration: 1_500_000,
        eval_count: 4,
        eval_duration: 3_250_000,
      },
    ]);
    const whole = await toNativeReply(
      context,
      (async function* () {
        yield* events;
      })(),
    );
    expect(whole).toMatchObject({
      message: {
        content: "Hi",
        tool_calls: [{ id: expect.stringMatching(/^call_[a-z0-9]{8}$/) }, { id: expect.stringMatching(/^call_[a-z0-9]{8}$/) }],
      },
      done: true,
      done_reason: "stop",
    });
  });

  it("counts the whole prompt in prompt_eval_count, and the cached part in prompt_eval_cached_count only when there is one", () => {
    const final = (cachedTokens: number) => new NativeReplyStream(context).next({ ...done, usage: { ...done.usage, cachedTokens } }).at(-1);
    expect(final(6)).toMatchObject({ prompt_eval_count: 10, prompt_eval_cached_count: 6 });
    expect(final(0)).toMatchObject({ prompt_eval_count: 10 });
    expect(final(0)).not.toHaveProperty("prompt_eval_cached_count");
  });

  it("sends the thought in message.thinking (chat) or thinking (generate), concatenated when not streamed", async () => {
    const events: ChatEvent[] = [{ type: "thinking", text: "Hm" }, { type: "thinking", text: "m." }, { type: "text", text: "Yes." }, done];
    const chunks = events.flatMap((event) => new NativeReplyStream(context).next(event));
    expect(chunks.slice(0, 3).map((chunk) => ("message" in chunk ? chunk.message : undefined))).toEqual([
      { role: "assistant", content: "", thinking: "Hm" },
      { role: "assistant", content: "", thinking: "m." },
      { role: "assistant", content: "Yes." },
    ]);
    const replay = async function* () {
      yield* events;
    };
    expect(await toNativeReply(context, replay())).toMatchObject({
      message: { role: "assistant", content: "Yes.", thinking: "Hmm." },
      done: true,
    });
    expect(await toNativeReply({ ...context, kind: "generate" }, replay())).toMatchObject({
      response: "Yes.",
      thinking: "Hmm.",
      done: true,
    });
  });

  it("translates chat requests with the native defaults, tool results by tool_name, and format", () => {
    const { chat, stream, loadOnly, keepAliveMs } = fromChatRequest({
      model: "m",
      messages: [
        { role: "USER", content: "weather?" },
        {
          role: "assistant",
          content: "",
          tool_calls: [{ function: { name: "a", arguments: { x: 1 } } }, { function: { name: "b", arguments: {} } }],
        },
        { role: "tool", content: "B", tool_name: "b" },
        { role: "tool", content: "A", tool_name: "a" },
      ],
      format: "json",
      options: { num_predict: 5, top_k: 7, stop: "END", unknown_option: true },
      keep_alive: "1m",
      think: true,
    });
    expect(stream).toBe(true);
    expect(loadOnly).toBe(false);
    expect(keepAliveMs).toBe(60_000);
    expect(chat.maxTokens).toBe(5);
    expect(chat.stop).toEqual(["END"]);
    expect(chat.sampling).toMatchObject({ temperature: 0.8, topP: 0.9, topK: 7, minP: 0, repeatPenalty: 1, penaltyWindow: 64 });
    expect(chat.responseFormat).toEqual({ type: "json_object" });
    expect(chat.messages).toEqual([
      { role: "user", content: "weather?" },
      {
        role: "assistant",
        content: "",
        toolCalls: [
          { id: "call_1_0", name: "a", arguments: '{"x":1}' },
          { id: "call_1_1", name: "b", arguments: "{}" },
        ],
      },
      { role: "tool", content: "B", toolCallId: "call_1_1" },
      { role: "tool", content: "A", toolCallId: "call_1_0" },
    ]);
    expect(() => fromChatRequest({ model: "m", messages: [{ role: "tool", content: "x", tool_name: "a" }] })).toThrow(
      /answers no unanswered call/,
    );
    expect(fromChatRequest({ model: "m" }).loadOnly).toBe(true);
  });

  it("translates generate requests: templated, raw, fill-in-the-middle, load-only", () => {
    expect(fromGenerateRequest({ model: "m", prompt: "p", system: "s" }).chat.messages).toEqual([
      { role: "system", content: "s" },
      { role: "user", content: "p" },
    ]);
    expect(fromGenerateRequest({ model: "m", prompt: "p", raw: true, context: [1] }).chat.prompt).toEqual({ type: "raw", text: "p" });
    expect(fromGenerateRequest({ model: "m", prompt: "def f(", suffix: "  return x" }).chat.prompt).toEqual({
      type: "infill",
      prefix: "def f(",
      suffix: "  return x",
    });
    expect(fromGenerateRequest({ model: "m", keep_alive: 0 })).toMatchObject({ loadOnly: true, keepAliveMs: 0 });
    expect(fromGenerateRequest({ model: "m", prompt: "", raw: true })).toMatchObject({ loadOnly: true });
    expect(fromGenerateRequest({ model: "m", suffix: "  return x" })).toMatchObject({ loadOnly: false });
    expect(() => fromGenerateRequest({ model: "m", prompt: "p", template: "{{ .Prompt }}" })).toThrow(/template/);
  });

  it("embeds with truncation on by default; show and delete take model or the older name", () => {
    expect(fromEmbedRequest({ model: "m", input: "x" }).embed).toEqual({ model: "m", inputs: ["x"], truncate: true });
    expect(fromModelRequest({ name: "old" })).toEqual({ model: "old", verbose: false });
    expect(() => fromModelRequest({})).toThrow(/model is required/);
    expect(() => fromChatRequest(undefined)).toThrow(/missing request body/);
  });

  it("answers errors as {error}, unknown models with the text clients match", () => {
    expect(toOllamaError(new ServerError("model_not_found", { model: "x" }))).toEqual({
      error: 'model "x" not found, try pulling it first',
    });
    expect(toOllamaError(new ServerError("internal_error", { cause: new Error("/secret") }))).toEqual({
      error: "The server had an error while processing your request.",
    });
  });
});
