import { GeneralChatWrapper, JinjaTemplateChatWrapper } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import type { ChatMessage } from "../../src/core/ChatRequest.js";
import { toChatHistory } from "../../src/engine/toChatHistory.js";
import { TEST_MODEL_CHAT_TEMPLATE } from "../../src/testmodels/testChatTemplate.js";

const conversation: ChatMessage[] = [
  { role: "user", content: "Weather in Paris?" },
  { role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }] },
  { role: "tool", toolCallId: "call_1", content: '{"temp_c":21,"sky":"clear"}' },
];
const functions = {
  get_weather: { description: "Current weather", params: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
} as const;

describe("rendering a tool conversation", () => {
  it("with the model's own template: tools in the system turn, the call and its result in the history", () => {
    const wrapper = new JinjaTemplateChatWrapper({ template: TEST_MODEL_CHAT_TEMPLATE });
    const prompt = wrapper
      .generateContextState({ chatHistory: toChatHistory(conversation), availableFunctions: functions })
      .contextText.toString();
    expect(prompt).toContain('"name": "get_weather"');
    expect(prompt).toContain("Current weather");
    expect(prompt).toContain('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>');
    expect(prompt).toContain('<tool_response>\n{"temp_c": 21, "sky": "clear"}\n</tool_response>');
    // The model continues its turn after the result.
    expect(prompt.trimEnd().endsWith("<|im_start|>assistant")).toBe(true);
  });

  it("with a template that knows no tools: the documented generic syntax", () => {
    const wrapper = new GeneralChatWrapper();
    const prompt = wrapper
      .generateContextState({ chatHistory: toChatHistory(conversation), availableFunctions: functions })
      .contextText.toString();
    expect(prompt).toContain("get_weather");
    expect(prompt).toContain("||call: get_weather(");
    expect(prompt).toContain('"temp_c": 21');
  });
});
