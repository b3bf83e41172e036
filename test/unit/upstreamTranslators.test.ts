import { describe, expect, it } from "vitest";
import type { ChatEvent } from "../../src/core/ChatEvent.js";
import type { ChatRequest } from "../../src/core/ChatRequest.js";
import { ChatCompletionStream } from "../../src/protocols/openai/ChatCompletionStream.js";
import { fromChatCompletionRequest } from "../../src/protocols/openai/fromChatCompletionRequest.js";
import { toUpstreamChatRequest } from "../../src/protocols/openai/toUpstreamRequest.js";
import { UpstreamChunkReader } from "../../src/protocols/openai/UpstreamChunkReader.js";

// Issue 34: a request forwarded to an OpenAI-compatible upstream, and its stream read back, are
// the inverses of what the server's own /v1/chat/completions reads and writes.

const body = {
  model: "qwen",
  messages: [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Weather in Paris?" },
    {
      role: "assistant",
      content: "",
      reasoning_content: "I should call the tool.",
      tool_calls: [{ id: "call_1", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } }],
    },
    { role: "tool", tool_call_id: "call_1", content: '{"temp":21}' },
    { role: "user", content: "And tomorrow?" },
  ],
  tools: [
    {
      type: "function",
      function: { name: "weather", description: "Weather now", parameters: { type: "object", properties: { city: { type: "string" } } } },
    },
  ],
  tool_choice: "auto",
  parallel_tool_calls: false,
  max_tokens: 64,
  temperature: 0.7,
  top_p: 0.9,
  seed: 5,
  stop: ["\n\n"],
  presence_penalty: 0.5,
  logit_bias: { "42": -100 },
  response_format: { type: "json_object" },
  reasoning_effort: "low",
  lora: [{ id: 1, scale: 0.5 }],
};

describe("forwarding a chat to an upstream", () => {
  it("writes a chat completions body that reads back as the same engine request", () => {
    const { chat } = fromChatCompletionRequest(body);
    const forwarded = toUpstreamChatRequest(chat, "Qwen/Qwen2.5-7B-Instruct");
    expect(forwarded).toMatchObject({ model: "Qwen/Qwen2.5-7B-Instruct", stream: true, stream_options: { include_usage: true } });
    const { chat: again } = fromChatCompletionRequest({ ...forwarded, model: "qwen" });
    expect(again).toEqual(chat);
  });

  it("sends images as data: URLs where the text has them, and refuses a prompt given as is", () => {
    const bytes = new Uint8Array([1, 2, 3]);
    const request: ChatRequest = {
      ...fromChatCompletionRequest({ model: "m", messages: [{ role: "user", content: "x" }] }).chat,
      messages: [
        {
          role: "user",
          content: "Look: and?",
          images: [{ at: 5, param: "p", source: { type: "checked", image: { format: "png", width: 1, height: 1, bytes } } }],
        },
      ],
    };
    expect((toUpstreamChatRequest(request, "m").messages as unknown[])[0]).toEqual({
      role: "user",
      content: [
        { type: "text", text: "Look:" },
        { type: "image_url", image_url: { url: "data:image/png;base64,AQID" } },
        { type: "text", text: " and?" },
      ],
    });
    expect(() => toUpstreamChatRequest({ ...request, prompt: { type: "raw", text: "x" } }, "m")).toThrow(/given as is/);
  });
});

describe("reading an upstream's stream", () => {
  it("gives back the events a server's own stream was written from", () => {
    const events: ChatEvent[] = [
      { type: "thinking", text: "Let me see." },
      { type: "text", text: "Calling." },
      { type: "tool_call_start", index: 0, name: "weather" },
      { type: "tool_call_arguments", index: 0, text: '{"city":' },
      { type: "tool_call_arguments", index: 0, text: '"Paris"}' },
      { type: "tool_call_start", index: 1, name: "time" },
      { type: "tool_call_arguments", index: 1, text: "{}" },
    ];
    const done = {
      type: "done" as const,
      finishReason: "tool_calls" as const,
      usage: { promptTokens: 40, cachedTokens: 32, completionTokens: 12, reasoningTokens: 3 },
      timings: { loadMs: 0, promptMs: 0, generationMs: 0 },
    };
    const writer = new ChatCompletionStream({ id: "chatcmpl-1", created: 1, model: "m", includeUsage: true });
    const chunks = [...[...events, done].flatMap((event) => writer.next({ prompt: 0, choice: 0, event })), ...writer.end()];
    let clock = 0;
    const reader = new UpstreamChunkReader({ now: () => (clock += 10) });
    // Through JSON, as they travel.
    const read = chunks.flatMap((chunk) => reader.read(JSON.parse(JSON.stringify(chunk))));
    expect(read).toEqual(events);
    expect(reader.finish()).toEqual({ ...done, timings: { loadMs: 0, promptMs: 10, generationMs: 10 } });
  });

  it("says what an upstream's stream lacked instead of guessing", () => {
    const reader = new UpstreamChunkReader();
    reader.read({ choices: [{ index: 0, delta: { content: "Hi" }, finish_reason: null }] });
    expect(() => reader.finish()).toThrow(/before its finish reason/);
    reader.read({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] });
    expect(() => reader.finish()).toThrow(/no usage/);
    reader.read({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 1 } });
    expect(reader.finish()).toMatchObject({ finishReason: "stop", usage: { promptTokens: 5, cachedTokens: 0, completionTokens: 1 } });
  });
});
