import { JinjaTemplateChatWrapper } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import type { ChatMessage } from "../../src/core/ChatRequest.js";
import { continuesLastMessage, toChatHistory } from "../../src/engine/toChatHistory.js";
import { TEST_MODEL_CHAT_TEMPLATE } from "../../src/testmodels/testChatTemplate.js";

describe("toChatHistory", () => {
  it("ends with an empty model turn to generate", () => {
    expect(
      toChatHistory([
        { role: "system", content: "s" },
        { role: "user", content: "u" },
      ]),
    ).toEqual([
      { type: "system", text: "s" },
      { type: "user", text: "u" },
      { type: "model", response: [] },
    ]);
  });

  it("puts tool results on their calls and continues the calling turn", () => {
    const history = toChatHistory([
      { role: "user", content: "weather?" },
      { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "get_weather", arguments: '{"city":"Paris"}' }] },
      { role: "tool", toolCallId: "c1", content: '{"temp":21}' },
    ]);
    expect(history).toEqual([
      { type: "user", text: "weather?" },
      { type: "model", response: [{ type: "functionCall", name: "get_weather", params: { city: "Paris" }, result: { temp: 21 } }] },
    ]);
    const continued = toChatHistory([
      { role: "user", content: "weather?" },
      { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "get_weather", arguments: "{}" }] },
      { role: "tool", toolCallId: "c1", content: "sunny" },
      { role: "assistant", content: "It is sunny." },
      { role: "user", content: "thanks" },
    ]);
    expect(continued[1]).toEqual({
      type: "model",
      response: [{ type: "functionCall", name: "get_weather", params: {}, result: "sunny" }, "It is sunny."],
    });
    expect(continued.at(-1)).toEqual({ type: "model", response: [] });
  });

  it("continues a last assistant message when asked: its turn is the one the model writes in, left open", () => {
    const prefilled: ChatMessage[] = [
      { role: "user", content: "Weather?" },
      { role: "assistant", content: "The weather is" },
    ];
    expect(toChatHistory(prefilled, true)).toEqual([
      { type: "user", text: "Weather?" },
      { type: "model", response: ["The weather is"] },
    ]);
    // Not asked: a turn of its own after it.
    expect(toChatHistory(prefilled).at(-1)).toEqual({ type: "model", response: [] });
    // The template renders it without its end of turn: the prompt ends with the prefill.
    const wrapper = new JinjaTemplateChatWrapper({ template: TEST_MODEL_CHAT_TEMPLATE });
    const prompt = wrapper.generateContextState({ chatHistory: toChatHistory(prefilled, true) }).contextText.toString();
    expect(prompt.endsWith("<|im_start|>assistant\nThe weather is")).toBe(true);
  });

  it("continues only an assistant message without tool calls", () => {
    const calling: ChatMessage[] = [
      { role: "user", content: "Weather?" },
      { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "get_weather", arguments: "{}" }] },
    ];
    expect(continuesLastMessage(calling, true)).toBe(false);
    expect(continuesLastMessage([{ role: "user", content: "Hi" }], true)).toBe(false);
    expect(continuesLastMessage([{ role: "assistant", content: "Hi" }], undefined)).toBe(false);
    expect(continuesLastMessage([{ role: "assistant", content: "Hi" }], true)).toBe(true);
  });
});
