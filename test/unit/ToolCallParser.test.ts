import { describe, expect, it } from "vitest";
import { ToolCallParser, type ToolCallParserEvent } from "../../src/engine/tools/ToolCallParser.js";

const qwen = { paramsPrefix: '", "arguments": ', suffix: "}\n</tool_call>", nextCall: '\n<tool_call>\n{"name": "' };

function feed(parser: ToolCallParser, pieces: string[]): ToolCallParserEvent[] {
  return pieces.flatMap((piece) => parser.push(piece));
}

/** Joins argument pieces per call, as a client accumulating stream fragments would. */
function calls(events: ToolCallParserEvent[]): Array<{ name: string; arguments: string }> {
  const result: Array<{ name: string; arguments: string }> = [];
  for (const event of events) {
    if (event.type === "start") result[event.index] = { name: event.name, arguments: "" };
    if (event.type === "arguments") result[event.index]!.arguments += event.text;
  }
  return result;
}

describe("ToolCallParser", () => {
  it("reads one call whose pieces split every delimiter", () => {
    const text = 'get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
    const pieces = text.split(""); // one character at a time: the worst case
    const events = feed(new ToolCallParser(qwen), pieces);
    expect(calls(events)).toEqual([{ name: "get_weather", arguments: '{"city": "Paris"}' }]);
    expect(events.filter((event) => event.type === "end")).toEqual([{ type: "end", index: 0 }]);
    // The name is reported once complete, before any argument text.
    expect(events[0]).toEqual({ type: "start", index: 0, name: "get_weather" });
  });

  it("reads several calls in one section", () => {
    const text = 'a", "arguments": {"x": 1}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>';
    const parser = new ToolCallParser(qwen);
    const events = feed(parser, [text.slice(0, 17), text.slice(17, 50), text.slice(50)]);
    expect(calls(events)).toEqual([
      { name: "a", arguments: '{"x": 1}' },
      { name: "b", arguments: "{}" },
    ]);
    expect(parser.calls).toBe(2);
  });

  it("starts in the arguments of a call whose name was given", () => {
    const parser = new ToolCallParser({ paramsPrefix: "(", suffix: ")", nextCall: "\n||call: " }, { name: "add" });
    const events = feed(parser, ['{"a": ', "1, ", '"b": 2}', ")"]);
    expect(
      events
        .filter((event) => event.type === "arguments")
        .map((event) => (event.type === "arguments" ? event.text : ""))
        .join(""),
    ).toBe('{"a": 1, "b": 2}');
    expect(parser.calls).toBe(1);
  });

  it("streams argument text as soon as it cannot be the closing delimiter", () => {
    const parser = new ToolCallParser(qwen, { name: "f" });
    expect(parser.push('{"q": "x"')).toEqual([{ type: "arguments", index: 0, text: '{"q": "x"' }]);
    expect(parser.push("}")).toEqual([]); // may be the start of "}\n</tool_call>"
    expect(parser.push("}\n</tool")).toEqual([{ type: "arguments", index: 0, text: "}" }]);
  });
});
