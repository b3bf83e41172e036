import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CALL_FAMILIES, GENERIC_CALLS } from "../../src/chatTemplates/chatFormats.js";
import { ToolCallParser, type ToolCallParserEvent } from "../../src/engine/tools/ToolCallParser.js";
import { callDelimitersOf } from "../../src/engine/tools/ToolCallSyntax.js";

const qwen = { paramsPrefix: '", "arguments": ', suffix: "}\n</tool_call>", nextCall: '\n<tool_call>\n{"name": "', sectionSuffix: "" };

/** `text` cut at the given positions. */
function cut(text: string, positions: number[]): string[] {
  const at = [...new Set(positions.map((position) => position % (text.length + 1)))].sort((a, b) => a - b);
  return [0, ...at].map((start, i) => text.slice(start, [...at, text.length][i]));
}

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
    const parser = new ToolCallParser({ paramsPrefix: "(", suffix: ")", nextCall: "\n||call: ", sectionSuffix: "" }, { name: "add" });
    const events = feed(parser, ['{"a": ', "1, ", '"b": 2}', ")"]);
    expect(
      events
        .filter((event) => event.type === "arguments")
        .map((event) => (event.type === "arguments" ? event.text : ""))
        .join(""),
    ).toBe('{"a": 1, "b": 2}');
    expect(parser.calls).toBe(1);
  });

  it("streams argument text as it comes, and holds back only what may be the suffix after the value", () => {
    const parser = new ToolCallParser(qwen, { name: "f" });
    expect(parser.push('{"q": "x"')).toEqual([{ type: "arguments", index: 0, text: '{"q": "x"' }]);
    // The value's own closing brace: the arguments are complete, whatever follows.
    expect(parser.push("}")).toEqual([{ type: "arguments", index: 0, text: "}" }]);
    expect(parser.push("}\n</tool")).toEqual([]); // the suffix, arriving over several tokens
    expect(parser.push("_call>")).toEqual([{ type: "end", index: 0 }]);
  });

  it("ends a call whose suffix is empty with its arguments' own closing brace (Llama 3.x)", () => {
    const llama = { paramsPrefix: '", "parameters": ', suffix: "", nextCall: '; {"name": "', sectionSuffix: "" };
    const text = 'get_weather", "parameters": {"city": "Paris", "when": {"day": 1}}; {"name": "now", "parameters": {}}';
    const parser = new ToolCallParser(llama);
    const events = feed(parser, text.split(""));
    expect(calls(events)).toEqual([
      { name: "get_weather", arguments: '{"city": "Paris", "when": {"day": 1}}' },
      { name: "now", arguments: "{}" },
    ]);
    expect(events.filter((event) => event.type === "end")).toHaveLength(2);
  });

  it("keeps a suffix that also occurs inside the arguments, in nested values and strings (Mistral)", () => {
    const mistral = { paramsPrefix: '", "arguments": ', suffix: "}", nextCall: ', {"name": "', sectionSuffix: "" };
    const text =
      'search", "arguments": {"filter": {"tags": ["a", "b]"]}, "q": "x} \\" }"}}, {"name": "next", "arguments": {"n": [1, [2]]}}]';
    const events = feed(new ToolCallParser(mistral), [text.slice(0, 30), text.slice(30, 61), text.slice(61)]);
    expect(calls(events)).toEqual([
      { name: "search", arguments: '{"filter": {"tags": ["a", "b]"]}, "q": "x} \\" }"}' },
      { name: "next", arguments: '{"n": [1, [2]]}' },
    ]);
    for (const call of calls(events)) expect(() => JSON.parse(call.arguments) as unknown).not.toThrow();
  });

  it("reads back any JSON arguments, split anywhere, in every family's syntax", () => {
    const syntaxes = [
      ...[...CALL_FAMILIES, { name: "generic", calls: GENERIC_CALLS }]
        .filter((family) => !family.calls.parameters && !family.calls.keywordArguments)
        .map((family) => callDelimitersOf(family.calls)),
      { paramsPrefix: "(", suffix: ")", nextCall: "\n||call: ", sectionSuffix: "" },
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...syntaxes),
        fc.array(fc.tuple(fc.stringMatching(/^[a-z_]{1,12}$/), fc.dictionary(fc.string(), fc.jsonValue())), { minLength: 1, maxLength: 3 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (syntax, written, cuts) => {
          // A numbering family's calls carry their index (Kimi K2's `:0`, `:1`; Command R7B's ids) or an id (Mistral Small 3.2's).
          const numbered = (text: string, index: number) => text.replaceAll("{index}", String(index)).replaceAll("{id}", "call00001");
          const text =
            written
              .map(
                ([name, args], index) =>
                  `${index === 0 ? "" : numbered(syntax.nextCall, index)}${name}${numbered(syntax.paramsPrefix, index)}${JSON.stringify(args)}${syntax.suffix}`,
              )
              .join("") + syntax.sectionSuffix;
          const at = [...new Set(cuts.map((cut) => cut % (text.length + 1)))].sort((a, b) => a - b);
          const pieces = [0, ...at].map((start, i) => text.slice(start, [...at, text.length][i]));
          const events = feed(new ToolCallParser(syntax), pieces);
          expect(calls(events)).toEqual(written.map(([name, args]) => ({ name, arguments: JSON.stringify(args) })));
          expect(events.filter((event) => event.type === "end")).toHaveLength(written.length);
        },
      ),
      { seed: 20261126, numRuns: 300 },
    );
  });

  it("reads back arguments written one element per parameter (Qwen3-Coder, GLM, MiniMax-M2, Seed-OSS) as JSON, split anywhere", () => {
    const families = CALL_FAMILIES.filter((family) => family.calls.parameters);
    expect(families.map((family) => family.name)).toEqual(["Seed-OSS", "MiniMax-M2", "Qwen3-Coder", "GLM 4.5"]);
    const tools = [
      {
        name: "f",
        parameters: { type: "object", properties: { text: { type: "string" }, count: { type: "integer" }, tags: { type: "array" } } },
      },
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...families),
        fc.record(
          { text: fc.stringMatching(/^[^<]*$/), count: fc.integer(), tags: fc.array(fc.string(), { maxLength: 3 }) },
          { requiredKeys: [] },
        ),
        fc.array(fc.nat(), { maxLength: 8 }),
        ({ calls: syntax }, args, cuts) => {
          const p = syntax.parameters!;
          const elements = Object.entries(args)
            .map(
              ([name, value]) => `${p.prefix}${name}${p.nameEnd}${typeof value === "string" ? value : JSON.stringify(value)}${p.valueEnd}`,
            )
            .join("");
          const text = `f${syntax.paramsPrefix}${elements}${syntax.suffix}${syntax.sectionSuffix}`;
          const events = feed(new ToolCallParser(callDelimitersOf(syntax, tools)), cut(text, cuts));
          const [call] = calls(events);
          expect(call?.name).toBe("f");
          expect(JSON.parse(call!.arguments)).toEqual(args);
          expect(events.filter((event) => event.type === "end")).toHaveLength(1);
        },
      ),
      { seed: 20261127, numRuns: 300 },
    );
  });

  it("reads back arguments written as a Python call's keyword arguments (LFM2) as JSON, split anywhere", () => {
    const lfm2 = CALL_FAMILIES.find((family) => family.name === "LFM2")!.calls;
    /** A value as Python writes it: strings single-quoted with their quotes and backslashes escaped. */
    const python = (value: unknown): string => {
      if (typeof value === "string") return `'${value.replaceAll("\\", "\\\\").replaceAll("'", "\\'").replaceAll("\n", "\\n")}'`;
      if (value === true) return "True";
      if (value === false) return "False";
      if (value === null) return "None";
      if (Array.isArray(value)) return `[${value.map(python).join(", ")}]`;
      return String(value);
    };
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.stringMatching(/^[a-z_]{1,8}$/),
            fc.dictionary(
              fc.stringMatching(/^[a-z_]{1,8}$/),
              fc.oneof(
                fc.string(),
                fc.integer(),
                fc.boolean(),
                fc.constant(null),
                fc.array(fc.oneof(fc.string(), fc.integer()), { maxLength: 3 }),
              ),
              { maxKeys: 3 },
            ),
          ),
          { minLength: 1, maxLength: 3 },
        ),
        fc.array(fc.nat(), { maxLength: 8 }),
        (written, cuts) => {
          const text =
            written
              .map(
                ([name, args]) =>
                  `${name}(${Object.entries(args)
                    .map(([key, value]) => `${key}=${python(value)}`)
                    .join(", ")})`,
              )
              .join(lfm2.betweenCalls) + lfm2.sectionSuffix;
          const events = feed(new ToolCallParser(callDelimitersOf(lfm2)), cut(text, cuts));
          expect(calls(events).map((call) => ({ name: call.name, arguments: JSON.parse(call.arguments) as unknown }))).toEqual(
            written.map(([name, args]) => ({ name, arguments: args })),
          );
        },
      ),
      { seed: 20261128, numRuns: 300 },
    );
  });

  it("reads back Gemma 4's arguments (strings between <|\"|>, bare keys) as JSON, split anywhere", () => {
    const gemma4 = CALL_FAMILIES.find((family) => family.name === "Gemma 4")!.calls;
    /** A value as Gemma 4's template writes a call's (its format_argument macro, keys not escaped). */
    const written = (value: unknown): string => {
      if (typeof value === "string") return `<|"|>${value}<|"|>`;
      if (Array.isArray(value)) return `[${value.map(written).join(",")}]`;
      if (typeof value === "object" && value !== null) {
        return `{${Object.entries(value)
          .map(([key, each]) => `${key}:${written(each)}`)
          .join(",")}}`;
      }
      return String(value);
    };
    const key = fc.stringMatching(/^[a-z_]{1,8}$/);
    const text = fc.string().filter((each) => !each.includes('<|"|>'));
    const scalar = fc.oneof(text, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null));
    const value = fc.oneof(scalar, fc.array(scalar, { maxLength: 3 }), fc.dictionary(key, scalar, { maxKeys: 2 }));
    fc.assert(
      fc.property(
        fc.array(fc.tuple(key, fc.dictionary(key, value, { maxKeys: 3 })), { minLength: 1, maxLength: 3 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (calls_, cuts) => {
          const section = calls_
            .map(
              ([name, args], index) =>
                `${index === 0 ? "" : gemma4.prefix}${name}${gemma4.paramsPrefix}${written(args).slice(1, -1)}${gemma4.suffix}`,
            )
            .join(gemma4.betweenCalls);
          const events = feed(new ToolCallParser(callDelimitersOf(gemma4)), cut(section, cuts));
          expect(calls(events).map((call) => ({ name: call.name, arguments: JSON.parse(call.arguments) as unknown }))).toEqual(
            calls_.map(([name, args]) => ({ name, arguments: args })),
          );
        },
      ),
      { seed: 20261129, numRuns: 300 },
    );
  });
});
