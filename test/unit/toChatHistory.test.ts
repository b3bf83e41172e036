import { describe, expect, it } from "vitest";
import { toChatHistory } from "../../src/engine/toChatHistory.js";

describe("toChatHistory", () => {
  it("ends with an empty model turn to generate", () => {
    expect(toChatHistory([{ role: "system", content: "s" }, { role: "user", content: "u" }])).toEqual([
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
});
