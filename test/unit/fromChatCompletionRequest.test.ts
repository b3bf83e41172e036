import { describe, expect, it } from "vitest";
import { ServerError } from "../../src/core/ServerError.js";
import { fromChatCompletionRequest } from "../../src/protocols/openai/fromChatCompletionRequest.js";

const user = { role: "user", content: "Hi" };

function errorOf(body: unknown): ServerError {
  try {
    fromChatCompletionRequest(body);
  } catch (error) {
    if (error instanceof ServerError) return error;
    throw error;
  }
  throw new Error("expected a ServerError");
}

describe("fromChatCompletionRequest", () => {
  it("translates a full request and applies OpenAI's defaults", () => {
    const parsed = fromChatCompletionRequest({
      model: "m",
      messages: [
        { role: "system", content: "Be brief." },
        {
          role: "user",
          content: [
            { type: "text", text: "a" },
            { type: "text", text: "b" },
          ],
        },
      ],
      max_tokens: 7,
      stop: "\n",
      stream: true,
      stream_options: { include_usage: true },
      some_future_field: { ignored: true },
    });
    expect(parsed.stream).toBe(true);
    expect(parsed.includeUsage).toBe(true);
    expect(parsed.chat).toEqual({
      model: "m",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "a\nb" },
      ],
      maxTokens: 7,
      stop: ["\n"],
      sampling: { temperature: 1, topP: 1, seed: undefined, presencePenalty: 0, frequencyPenalty: 0, logitBias: new Map() },
      tools: [],
      toolChoice: { type: "none" },
      parallelToolCalls: true,
      responseFormat: { type: "text" },
      n: 1,
    });
  });

  it("translates tools, choices and response formats", () => {
    const parameters = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
    const tools = [{ type: "function", function: { name: "get_weather", description: "d", parameters } }];
    const auto = fromChatCompletionRequest({ model: "m", messages: [user], tools });
    expect(auto.chat.tools).toEqual([{ name: "get_weather", description: "d", parameters }]);
    expect(auto.chat.toolChoice).toEqual({ type: "auto" });
    const named = fromChatCompletionRequest({
      model: "m",
      messages: [user],
      tools: [{ type: "function", function: { name: "f" } }],
      tool_choice: { type: "function", function: { name: "f" } },
      parallel_tool_calls: false,
      response_format: { type: "json_schema", json_schema: { name: "s", schema: { type: "object" } } },
    });
    expect(named.chat.tools[0]?.parameters).toEqual({ type: "object", properties: {} });
    expect(named.chat.toolChoice).toEqual({ type: "function", name: "f" });
    expect(named.chat.parallelToolCalls).toBe(false);
    expect(named.chat.responseFormat).toEqual({ type: "json_schema", name: "s", schema: { type: "object" } });
  });

  it("prefers max_completion_tokens over max_tokens", () => {
    expect(fromChatCompletionRequest({ model: "m", messages: [user], max_tokens: 5, max_completion_tokens: 9 }).chat.maxTokens).toBe(9);
  });

  it("keeps a tool conversation whose results answer preceding calls", () => {
    const parsed = fromChatCompletionRequest({
      model: "m",
      messages: [
        user,
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "f", arguments: "{}" } }] },
        { role: "tool", tool_call_id: "call_1", content: '{"ok":true}' },
      ],
    });
    expect(parsed.chat.messages[1]).toEqual({ role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "f", arguments: "{}" }] });
    expect(parsed.chat.messages[2]).toEqual({ role: "tool", content: '{"ok":true}', toolCallId: "call_1" });
  });

  it.each([
    [[], undefined, "The request body must be a JSON object."],
    [{ messages: [user] }, "model", "Missing required parameter: 'model'."],
    [{ model: 3, messages: [user] }, "model", "Invalid type for 'model': expected string, got an integer."],
    [{ model: "m" }, "messages", "Missing required parameter: 'messages'."],
    [{ model: "m", messages: [] }, "messages", undefined],
    [{ model: "m", messages: [{ role: "robot", content: "x" }] }, "messages[0].role", undefined],
    [
      { model: "m", messages: [{ role: "user", content: 5 }] },
      "messages[0].content",
      "Invalid value for 'messages[0].content': expected a string or an array of content parts.",
    ],
    [
      { model: "m", messages: [{ role: "user", content: [{ type: "input_audio", input_audio: { data: "x", format: "wav" } }] }] },
      "messages[0].content[0].type",
      undefined,
    ],
    [
      { model: "m", messages: [{ role: "user", content: [{ type: "image_url", image_url: {} }] }] },
      "messages[0].content[0].image_url.url",
      undefined,
    ],
    [
      { model: "m", messages: [{ role: "system", content: [{ type: "image_url", image_url: { url: "data:," } }] }] },
      "messages[0].content[0].type",
      undefined,
    ],
    [{ model: "m", messages: [{ role: "user", content: [{ type: "text" }] }] }, "messages[0].content[0].text", undefined],
    [{ model: "m", messages: [user], temperature: 3 }, "temperature", undefined],
    [{ model: "m", messages: [user], temperature: "hot" }, "temperature", undefined],
    [{ model: "m", messages: [user], top_p: -0.1 }, "top_p", undefined],
    [{ model: "m", messages: [user], max_tokens: 0 }, "max_tokens", undefined],
    [{ model: "m", messages: [user], max_tokens: 1.5 }, "max_tokens", undefined],
    [{ model: "m", messages: [user], presence_penalty: 2.5 }, "presence_penalty", undefined],
    [{ model: "m", messages: [user], frequency_penalty: -3 }, "frequency_penalty", undefined],
    [{ model: "m", messages: [user], stop: ["a", "b", "c", "d", "e"] }, "stop", undefined],
    [{ model: "m", messages: [user], stop: [1] }, "stop[0]", undefined],
    [{ model: "m", messages: [user], stop: "" }, "stop", undefined],
    [{ model: "m", messages: [user], seed: "x" }, "seed", undefined],
    [{ model: "m", messages: [user], n: 9 }, "n", undefined],
    [{ model: "m", messages: [user], top_logprobs: 2 }, "top_logprobs", undefined],
    [{ model: "m", messages: [user], logprobs: true, top_logprobs: 21 }, "top_logprobs", undefined],
    [{ model: "m", messages: [user], stream: "yes" }, "stream", undefined],
    [{ model: "m", messages: [user], stream_options: { include_usage: true } }, "stream_options", undefined],
    [{ model: "m", messages: [user, { role: "tool", tool_call_id: "nope", content: "{}" }] }, "messages[1].tool_call_id", undefined],
    [{ model: "m", messages: [user, { role: "tool", content: "{}" }] }, "messages[1].tool_call_id", undefined],
    [{ model: "m", messages: [{ role: "assistant", content: null }] }, "messages[0].content", undefined],
  ])("refuses %j naming %s", (body, param, message) => {
    const error = errorOf(body);
    expect(error.code).toBe("invalid_request");
    expect(error.param).toBe(param);
    if (message) expect(error.message).toBe(message);
    else expect(error.message).toContain(`'${param}'`);
  });

  it("refuses a tool result that answers a call already answered or made before another turn", () => {
    const call = {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }],
    };
    const answer = { role: "tool", tool_call_id: "c1", content: "1" };
    expect(errorOf({ model: "m", messages: [user, call, answer, answer] }).param).toBe("messages[3].tool_call_id");
    expect(errorOf({ model: "m", messages: [user, call, user, answer] }).param).toBe("messages[3].tool_call_id");
  });
});
