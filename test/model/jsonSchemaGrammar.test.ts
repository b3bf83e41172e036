// The GBNF from src/engine/jsonSchemaToGbnf.ts, run by llama.cpp itself: first its grammar
// matcher over chosen texts (exact acceptance and rejection), then sampling from the random-weights
// test model under each grammar, with every output parsed and validated by ajv.
import { Ajv2020 } from "ajv/dist/2020.js";
import fc from "fast-check";
import { getLlama, LlamaGrammarEvaluationState, LlamaLogLevel, TokenBias } from "node-llama-cpp";
import type { Llama, LlamaContext, LlamaContextSequence, LlamaGrammar, LlamaModel, Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { INTEGER_LIMIT } from "../../src/core/jsonSchemaSupport.js";
import { gbnfLiteral, jsonObjectGbnf, jsonSchemaToGbnf, jsonValueGbnf } from "../../src/engine/jsonSchemaToGbnf.js";
import type { GbnfRules } from "../../src/engine/jsonSchemaToGbnf.js";
import { FORMATS } from "../support/formatChecks.js";
import { zodPerson, zodPersonJsonSchema } from "../support/zodPerson.js";
import { testModelPath } from "../support/testModels.js";

/** Enum values whose JSON needs escaping, twice over once inside a GBNF literal. */
const TRICKY_VALUES = [
  'say "hi"',
  "back\\slash \\n",
  "tab\there",
  "new\nline\r\n",
  "é 日本 🎉 \u{10ffff}",
  "ctl \u0001\u001f\u007f\u0085 \u2028",
  "",
  "</tool_call>",
  '{"a": 1}',
  "# [not] a (comment) | ::=",
  42,
  -1.5e-7,
  1e21,
  true,
  null,
];

/** True when the only whitespace outside strings is exactly one space after each ":" and ",". */
function hasFixedLayout(text: string): boolean {
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const character = text[index] as string;
    if (inString) {
      if (character === "\\") index++;
      else if (character === '"') inString = false;
    } else if (character === '"') {
      inString = true;
    } else if (character === ":" || character === ",") {
      if (text[index + 1] !== " ") return false;
      index++;
    } else if (/\s/.test(character)) {
      return false;
    }
  }
  return true;
}

function grammarText({ rules, root }: GbnfRules): string {
  return [`root ::= ${root}`, ...rules].join("\n");
}

function schemaGrammar(schema: object | boolean): string {
  return grammarText(jsonSchemaToGbnf(schema, { prefix: "s-" }));
}

/**
 * Whether llama.cpp's grammar matcher accepts the whole text. `_testText` is internal to
 * node-llama-cpp (3.22.1, pinned in package.json); it feeds llama_grammar_accept one code point
 * at a time and reports whether the grammar is then complete.
 */
function accepts(grammar: LlamaGrammar, text: string): boolean {
  return (grammar as unknown as { _testText(text: string): boolean })._testText(text);
}

interface GenerationCase {
  name: string;
  schema: object | boolean;
  /** Rules to sample with, when not jsonSchemaToGbnf(schema). */
  grammar?: string;
  /** The schema allows values of any size, so a sample may run into the token cap. */
  unbounded?: boolean;
}

const GENERATION_CASES: GenerationCase[] = [
  {
    name: "an object with required and optional properties",
    schema: {
      type: "object",
      properties: {
        name: { type: "string", minLength: 1, maxLength: 12 },
        age: { type: "integer" },
        email: { type: "string", format: "email" },
        tags: { type: "array", items: { type: "string", maxLength: 6 }, maxItems: 3 },
        active: { type: "boolean" },
      },
      required: ["name", "active"],
      additionalProperties: false,
    },
  },
  {
    name: "nested objects and arrays with minItems / maxItems",
    schema: {
      type: "object",
      properties: {
        id: { type: "string", format: "uuid" },
        lines: {
          type: "array",
          minItems: 1,
          maxItems: 3,
          items: { type: "object", properties: { sku: { enum: ["A-1", 'B"2'] }, qty: { type: "integer" } }, required: ["sku", "qty"] },
        },
        shipping: {
          type: "object",
          properties: {
            city: { type: "string", maxLength: 10 },
            zip: { type: "string", minLength: 5, maxLength: 5 },
            on: { type: "string", format: "date" },
          },
          required: ["on"],
        },
      },
      required: ["id", "lines", "shipping"],
    },
  },
  {
    name: "objects whose properties are all optional",
    schema: {
      type: "array",
      minItems: 4,
      maxItems: 4,
      items: {
        type: "object",
        properties: { a: { type: "integer" }, b: { type: "boolean" }, c: { type: "null" }, d: { type: "string", maxLength: 3 } },
      },
    },
  },
  { name: "enums of tricky strings", schema: { type: "array", minItems: 4, maxItems: 4, items: { enum: TRICKY_VALUES } } },
  {
    name: "anyOf",
    schema: {
      type: "array",
      maxItems: 4,
      items: {
        anyOf: [
          { type: "integer" },
          { type: "string", maxLength: 5 },
          { type: "array", items: { type: "boolean" }, maxItems: 2 },
          { type: "object", properties: { k: { const: "v" } }, required: ["k"] },
        ],
      },
    },
  },
  {
    name: "a tagged oneOf",
    schema: {
      type: "array",
      minItems: 3,
      maxItems: 3,
      items: {
        oneOf: [
          {
            type: "object",
            properties: { kind: { const: "circle" }, r: { type: "number" } },
            required: ["kind", "r"],
            additionalProperties: false,
          },
          {
            type: "object",
            properties: { kind: { const: "square" }, side: { type: "integer" } },
            required: ["kind", "side"],
            additionalProperties: false,
          },
          { type: "null" },
        ],
      },
    },
  },
  {
    name: "nullable and type arrays",
    schema: {
      type: "object",
      properties: { x: { type: "string", nullable: true, maxLength: 5 }, y: { type: ["integer", "null"] }, z: { enum: ["a", null] } },
      required: ["x", "y", "z"],
    },
  },
  {
    name: "a recursive tree through $defs, with an enum of leaves",
    schema: {
      $ref: "#/$defs/node",
      $defs: {
        node: {
          type: "object",
          properties: {
            v: { enum: [1, 2, 3] },
            kids: { type: "array", maxItems: 2, items: { anyOf: [{ enum: ["leaf", 0] }, { $ref: "#/$defs/node" }] } },
          },
          required: ["v", "kids"],
        },
      },
    },
    unbounded: true,
  },
  {
    name: "dates, times, UUIDs and IPv4 addresses",
    schema: {
      type: "object",
      properties: Object.fromEntries(["date", "time", "date-time", "uuid", "ipv4"].map((format) => [format, { type: "string", format }])),
      required: ["date", "time", "date-time", "uuid", "ipv4"],
    },
  },
  {
    name: "e-mail addresses and host names",
    schema: {
      type: "object",
      properties: { email: { type: "string", format: "email" }, host: { type: "string", format: "hostname" } },
      required: ["email", "host"],
    },
  },
  {
    name: "strings with minLength and maxLength",
    schema: { type: "array", items: { type: "string", minLength: 2, maxLength: 4 }, minItems: 2, maxItems: 4 },
  },
  {
    name: "integers, numbers and booleans",
    schema: {
      type: "object",
      properties: {
        i: { type: "integer" },
        n: { type: "number" },
        b: { type: "boolean" },
        list: { type: "array", items: { type: "number" }, maxItems: 3 },
      },
      required: ["i", "n", "b", "list"],
    },
  },
  { name: "any JSON object (json_object)", schema: { type: "object" }, grammar: grammarText(jsonObjectGbnf("json-")), unbounded: true },
];

const SEEDS = [1, 2, 3, 4, 5, 6, 7, 8];
/**
 * Every bounded case above fits, even at four byte tokens per non-ASCII character (the longest,
 * an e-mail address and a host name, is at most 473 ASCII characters).
 */
const TOKEN_CAP = 500;

describe("JSON Schema grammars in llama.cpp", () => {
  let llama: Llama;
  let model: LlamaModel;
  let context: LlamaContext;
  let sequence: LlamaContextSequence;
  let prompt: Token[];
  const ajv = new Ajv2020({ strict: true, formats: FORMATS });
  const grammars = new Map<string, Promise<LlamaGrammar>>();

  /** Each grammar text is parsed by llama.cpp once. */
  function grammarOf(text: string): Promise<LlamaGrammar> {
    let grammar = grammars.get(text);
    if (grammar === undefined) {
      grammar = llama.createGrammar({ grammar: text });
      grammars.set(text, grammar);
    }
    return grammar;
  }

  beforeAll(async () => {
    llama = await getLlama({ gpu: false, build: "never", maxThreads: 0, logLevel: LlamaLogLevel.warn });
    model = await llama.loadModel({ modelPath: await testModelPath("tiny") });
    context = await model.createContext({ contextSize: 2048, threads: 1 });
    sequence = context.getSequence();
    prompt = model.tokenize("<|im_start|>user\nReply with JSON.<|im_end|>\n<|im_start|>assistant\n", true);
  });

  afterAll(async () => {
    await context?.dispose();
    await model?.dispose();
    await llama?.dispose();
  });

  /**
   * The random-weights model has strong habits: after "{" it gives '"' a probability near 1e-10,
   * so it would close every object at once. A random logit bias per token, drawn from the seed,
   * makes each seed sample like a different model and walk a different path through the grammar.
   *
   * The byte tokens E0 and F0 are left out: llama.cpp's grammar decodes UTF-8 that arrives byte by
   * byte without rejecting overlong forms (E0 80..9F .., F0 80..8F .. ..), which a model with
   * random weights writes now and then, and JavaScript then reads each of their bytes as U+FFFD,
   * lengthening strings past maxLength. A trained model does not write them.
   */
  function randomBias(seed: number): TokenBias {
    const bias = new TokenBias(model.tokenizer);
    const vocabulary = model.fileInfo.metadata.tokenizer.ggml.tokens;
    let state = seed;
    for (const [index, text] of vocabulary.entries()) {
      const token = index as Token;
      state = (Math.imul(state, 1103515245) + 12345) >>> 0;
      // GPT-2's byte alphabet spells the bytes E0 and F0 as "à" and "ð".
      if (text === "\u00e0" || text === "\u00f0") bias.set(token, "never");
      else if (!model.isEogToken(token)) bias.set(token, { logit: ((state / 2 ** 32) * 2 - 1) * 30 });
    }
    return bias;
  }

  /** Samples under the grammar until end of generation (which a complete grammar forces) or the cap. */
  async function generate(grammar: LlamaGrammar, seed: number): Promise<{ text: string; finished: boolean }> {
    await sequence.clearHistory();
    const tokens: Token[] = [];
    const grammarEvaluationState = new LlamaGrammarEvaluationState({ model, grammar });
    for await (const token of sequence.evaluate(prompt, {
      temperature: 0.8,
      seed,
      tokenBias: randomBias(seed),
      grammarEvaluationState,
      yieldEogToken: true,
    })) {
      if (model.isEogToken(token)) return { text: model.detokenize(tokens), finished: true };
      tokens.push(token);
      if (tokens.length === TOKEN_CAP) break;
    }
    return { text: model.detokenize(tokens), finished: false };
  }

  describe("llama.cpp's matcher accepts exactly the intended texts", () => {
    async function expectTexts(grammar: string, accepted: readonly string[], rejected: readonly string[]): Promise<void> {
      const parsed = await grammarOf(grammar);
      for (const text of accepted) expect(accepts(parsed, text), `accepts ${JSON.stringify(text)}`).toBe(true);
      for (const text of rejected) expect(accepts(parsed, text), `rejects ${JSON.stringify(text)}`).toBe(false);
    }

    it("enum values, written exactly as JSON.stringify writes them", async () => {
      const literals = TRICKY_VALUES.map((value) => JSON.stringify(value));
      await expectTexts(schemaGrammar({ enum: TRICKY_VALUES }), literals, [
        '"say \\u0022hi\\u0022"',
        '"tab\there"',
        '"new\\nline\\n"',
        "42.0",
        "-0.00000015",
        "1e+21 ",
        '""""',
        "nul",
      ]);
    });

    it("optional properties: any subset, in order, with the commas right", async () => {
      const allOptional = { properties: { a: { const: 1 }, b: { const: 2 }, c: { const: 3 } } };
      const subsets = [
        "{}",
        '{"a": 1}',
        '{"b": 2}',
        '{"c": 3}',
        '{"a": 1, "b": 2}',
        '{"a": 1, "c": 3}',
        '{"b": 2, "c": 3}',
        '{"a": 1, "b": 2, "c": 3}',
      ];
      const wrong = [
        '{"b": 2, "a": 1}',
        '{, "a": 1}',
        '{"a": 1,}',
        '{"a": 1, , "c": 3}',
        '{ "a": 1}',
        '{"a":1}',
        '{"a": 1,"b": 2}',
        '{"a": 1, "a": 1}',
        '{"d": 4}',
      ];
      await expectTexts(schemaGrammar(allOptional), subsets, wrong);

      const mixed = { properties: { a: { const: 1 }, b: { const: 2 }, c: { const: 3 }, d: { const: 4 } }, required: ["b", "d"] };
      await expectTexts(
        schemaGrammar(mixed),
        ['{"b": 2, "d": 4}', '{"a": 1, "b": 2, "d": 4}', '{"b": 2, "c": 3, "d": 4}', '{"a": 1, "b": 2, "c": 3, "d": 4}'],
        ["{}", '{"a": 1, "b": 2}', '{"b": 2}', '{"d": 4}', '{"a": 1, "d": 4}', '{"a": 1, "b": 2, "c": 3}'],
      );
      await expectTexts(schemaGrammar({ type: "object", additionalProperties: false }), ["{}"], ['{"a": 1}', "[]"]);
    });

    it("string lengths in characters, escapes and astral characters counting one", async () => {
      await expectTexts(
        schemaGrammar({ type: "string", minLength: 2, maxLength: 3 }),
        ['"ab"', '"abc"', '"a\\nb"', '"\\u00e9\\"\\\\"', '"🎉🎉🎉"', '"\\/\\b\\f"'],
        ['"a"', '"abcd"', '"\\ud83c\\udf89x"', '"a\nb"', '"a\\x"', '"a\\u00e"', '"ab'],
      );
      // Past 1000 the repetition is split into chunks (llama.cpp's limit is 2000 per repetition).
      const string = (length: number) => `"${"x".repeat(length)}"`;
      await expectTexts(
        schemaGrammar({ type: "string", minLength: 1500, maxLength: 3500 }),
        [string(1500), string(2000), string(3500)],
        [string(1499), string(3501)],
      );
      await expectTexts(schemaGrammar({ type: "string", minLength: 2999 }), [string(2999), string(5000)], [string(2998)]);
      const nulls = (count: number) => `[${Array(count).fill("null").join(", ")}]`;
      await expectTexts(
        schemaGrammar({ type: "array", items: { type: "null" }, minItems: 999, maxItems: 2001 }),
        [nulls(999), nulls(2001)],
        [nulls(998), nulls(2002)],
      );
    });

    it("integers and numbers, bounded", async () => {
      await expectTexts(
        schemaGrammar({ type: "integer" }),
        ["0", "-0", "7", "-120", "999999999999999"],
        ["01", "+1", "1.0", "1e3", "1000000000000000", ""],
      );
      await expectTexts(
        schemaGrammar({ type: "number" }),
        ["0", "-0.5", "3.25", "1e5", "-2.5e-10", "123456789012345.123456789012345"],
        [".5", "1.", "1e", "1E5", "1e+5", "1e100", "0x10", "NaN", "Infinity"],
      );
      // Bounds at or beyond ±(2^53−1) on numbers: no positive exponent, so below 10^15 in magnitude.
      await expectTexts(
        schemaGrammar({ type: "number", minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER }),
        ["0", "-0.5", "1e-5", "-999999999999999.999"],
        ["1e5", "1e+5", "1000000000000000"],
      );
    });

    it("integer ranges: exactly the integers between the bounds, in canonical form", async () => {
      // zod's .int() range is every integer generated; .positive() and .nonnegative() cut it at 0.
      await expectTexts(
        schemaGrammar(z.toJSONSchema(z.int())),
        ["0", "-1", "999999999999999", "-999999999999999"],
        ["01", "1000000000000000"],
      );
      await expectTexts(schemaGrammar(z.toJSONSchema(z.int().positive())), ["1", "9", "10", "999999999999999"], ["0", "-1", "-0", "01"]);
      await expectTexts(
        schemaGrammar(z.toJSONSchema(z.int().nonnegative())),
        ["0", "1", "999999999999999"],
        ["-1", "-0", "00", "1000000000000000"],
      );
      const magnitude = fc.oneof(
        fc.integer({ min: 0, max: 12 }),
        fc.integer({ min: 0, max: 1200 }),
        fc.integer({ min: 0, max: 10 ** 7 }),
        fc.constantFrom(0, 1, 9, 10, 99, 100, 999, 1000),
      );
      const bound = fc.tuple(magnitude, fc.boolean()).map(([value, negative]) => (negative ? -value : value));
      const keywords = fc.record({
        lowerExclusive: fc.boolean(),
        upperExclusive: fc.boolean(),
        lower: fc.option(bound),
        upper: fc.option(bound),
      });
      await fc.assert(
        fc.asyncProperty(keywords, fc.array(bound, { maxLength: 4 }), async ({ lower, upper, lowerExclusive, upperExclusive }, extra) => {
          const min = lower === null ? -INTEGER_LIMIT : lowerExclusive ? lower + 1 : lower;
          const max = upper === null ? INTEGER_LIMIT : upperExclusive ? upper - 1 : upper;
          fc.pre(min <= max);
          const schema = {
            type: "integer",
            ...(lower === null ? {} : { [lowerExclusive ? "exclusiveMinimum" : "minimum"]: lower }),
            ...(upper === null ? {} : { [upperExclusive ? "exclusiveMaximum" : "maximum"]: upper }),
          };
          const grammar = await grammarOf(schemaGrammar(schema));
          const candidates = [min - 1, min, min + 1, max - 1, max, max + 1, 0, -1, 1, Math.trunc((min + max) / 2), ...extra];
          for (const value of candidates.filter((candidate) => Math.abs(candidate) <= INTEGER_LIMIT + 1)) {
            expect(accepts(grammar, String(value)), `${value} in ${JSON.stringify(schema)}`).toBe(value >= min && value <= max);
          }
          // "-0" is the integer 0 too, but written only by the unbounded integer rule.
          const noncanonical = [`0${Math.abs(min)}`, `+${Math.abs(max)}`, "", ...(lower === null && upper === null ? [] : ["-0"])];
          for (const text of noncanonical) expect(accepts(grammar, text), `${text} in ${JSON.stringify(schema)}`).toBe(false);
        }),
        { numRuns: 150 },
      );
    });

    it("patterns: the JSON strings of what the pattern matches, escaped where JSON needs it", async () => {
      const quoted = (texts: string[]) => texts.map((text) => JSON.stringify(text));
      await expectTexts(
        schemaGrammar({ type: "string", pattern: '^[a-c"\\\\\\n\\u0001]{1,3}-\\d+$' }),
        [...quoted(["a-1", 'a"\\-12', "\n\u0001c-0"]), '"\\u0001-1"'],
        [...quoted(["-1", "abcd-1", "a-", "a-x", "d-1"]), '"a\n-1"', '"\u0001-1"', '"\\x-1"', '"\\u000a-1"'],
      );
      // Unanchored: any characters around a match.
      await expectTexts(
        schemaGrammar({ type: "string", pattern: "ab|^c$" }),
        quoted(["ab", "xaby", "c", "\n ab é"]),
        quoted(["", "a b", "cc", "xc"]),
      );
      // With a format and lengths: what satisfies all of them.
      await expectTexts(
        schemaGrammar({ type: "string", format: "date", pattern: "^19", maxLength: 10 }),
        quoted(["1999-12-31", "1996-02-29"]),
        quoted(["2000-01-01", "1999-02-29", "1999-1-1"]),
      );
    });

    it("dates with the days of each month and leap years", async () => {
      const quoted = (texts: string[]) => texts.map((text) => JSON.stringify(text));
      await expectTexts(
        schemaGrammar({ type: "string", format: "date" }),
        quoted(["2024-02-29", "2000-02-29", "0000-02-29", "1996-02-29", "2023-02-28", "2023-01-31", "2023-04-30", "2023-12-31"]),
        quoted([
          "2023-02-29",
          "1900-02-29",
          "2100-02-29",
          "2023-04-31",
          "2023-02-30",
          "2023-13-01",
          "2023-00-10",
          "2023-01-00",
          "2023-1-01",
        ]),
      );
      await expectTexts(
        schemaGrammar({ type: "string", format: "date-time" }),
        quoted(["2024-02-29T23:59:59Z", "2024-01-01T00:00:00.123456789+05:30", "1999-12-31T12:00:00-23:59"]),
        quoted([
          "2024-02-29T24:00:00Z",
          "2024-02-29T23:60:00Z",
          "2024-02-29 23:00:00Z",
          "2024-02-29T23:00:00",
          "2024-02-29t23:00:00z",
          "2024-02-29T23:00:00+24:00",
        ]),
      );
    });

    it("UUIDs, e-mail addresses, host names and IPv4 addresses", async () => {
      const check = async (format: string, accepted: string[], rejected: string[]) => {
        for (const text of accepted) expect(FORMATS[format]?.(text), text).toBe(true);
        await expectTexts(
          schemaGrammar({ type: "string", format }),
          accepted.map((text) => JSON.stringify(text)),
          rejected.map((text) => JSON.stringify(text)),
        );
      };
      await check(
        "uuid",
        ["123e4567-e89b-12d3-a456-426614174000"],
        ["123E4567-E89B-12D3-A456-426614174000", "123e4567e89b12d3a456426614174000"],
      );
      await check(
        "email",
        ["a.b+c@example.com", "x!#$%&'*+/=?^_`{|}~-@a-1.b2.c3", `${"a".repeat(64)}@b.c`],
        ["a@b", "a..b@c.d", ".a@b.c", "a@-b.c", "a b@c.d", `${"a".repeat(65)}@b.c`],
      );
      await check(
        "hostname",
        ["localhost", "a-b.example.org", "x".repeat(63)],
        ["-a.com", "a-.com", "a..b", "x".repeat(64), "a.b.c.d", "Example.com"],
      );
      await check("ipv4", ["0.0.0.0", "255.255.255.255", "10.1.20.199"], ["256.1.1.1", "01.1.1.1", "1.1.1", "1.1.1.1.1"]);
    });

    it("any JSON value or object, in the fixed layout", async () => {
      const value = '{"a": [1, {"b": null}, []], "c": "\\u00e9", "d": {}, "e": -1.5e-3}';
      await expectTexts(
        grammarText(jsonValueGbnf("v-")),
        [value, "[]", '"x"', "true", "null", "0"],
        ['{ "a": 1}', "[1,2]", '{"a" : 1}', "[1, 2 ]", " 1", "1\n"],
      );
      await expectTexts(grammarText(jsonObjectGbnf("o-")), [value, "{}", '{"": ""}'], ["[]", '"x"', "null", '{"a": 1']);
    });

    it("GBNF literals of arbitrary text", async () => {
      const texts = ['<tool_call>\n{"name": "', "\\ \" ' \t \r \n # [] () | ::= {1,2} *+?", "\u0001\u007f\u0085 é 日本 🎉 \u{10ffff}", "x"];
      for (const text of texts) {
        await expectTexts(`root ::= ${gbnfLiteral(text)}`, [text], [`${text}x`, text.slice(0, -1), ` ${text}`]);
      }
      expect(() => gbnfLiteral("a\u0000b")).toThrow(/NUL/);
      expect(() => gbnfLiteral("a\ud800b")).toThrow(/surrogate/);
    });

    it("rules of several schemas in one grammar, as for tool calls", async () => {
      const weather = jsonSchemaToGbnf(
        { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        { prefix: "tool0-" },
      );
      const add = jsonSchemaToGbnf(
        { type: "object", properties: { a: { type: "integer" }, b: { type: "integer" } }, required: ["a", "b"] },
        { prefix: "tool1-" },
      );
      for (const { rules } of [weather, add]) expect(rules.every((rule) => /^tool[01]-[A-Za-z0-9-]* ::= /.test(rule))).toBe(true);
      const grammar = [
        `root ::= ${gbnfLiteral('<tool_call>\n{"name": "')} ( ${gbnfLiteral('get_weather", "arguments": ')} ${weather.root} | ${gbnfLiteral('add", "arguments": ')} ${add.root} ) ${gbnfLiteral("}\n</tool_call>")}`,
        ...weather.rules,
        ...add.rules,
      ].join("\n");
      await expectTexts(
        grammar,
        [
          '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
          '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": -2}}\n</tool_call>',
        ],
        [
          '<tool_call>\n{"name": "add", "arguments": {"city": "Paris"}}\n</tool_call>',
          '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
        ],
      );
    });

    it("refuses what findUnsupportedSchemaFeature reports, and prefixes that are not rule names", () => {
      expect(() => jsonSchemaToGbnf({ properties: { zip: { type: "string", pattern: "^(?![0-9]{5}$)" } } }, { prefix: "s-" })).toThrow(
        /'pattern' at 'properties.zip'/,
      );
      expect(() => jsonSchemaToGbnf({ type: "string" }, { prefix: "s_" })).toThrow(/prefix/);
      expect(() => jsonValueGbnf("")).toThrow(/prefix/);
    });
  });

  describe("sampling from the test model under each grammar", () => {
    it.each(GENERATION_CASES)("$name", async ({ schema, grammar, unbounded }) => {
      const validate = ajv.compile(schema as object);
      const parsed = await grammarOf(grammar ?? schemaGrammar(schema));
      let finished = 0;
      for (const seed of SEEDS) {
        const sample = await generate(parsed, seed);
        if (!sample.finished) {
          expect(unbounded, `seed ${seed} reached ${TOKEN_CAP} tokens: ${sample.text.slice(0, 200)}`).toBe(true);
          continue;
        }
        finished++;
        const value: unknown = JSON.parse(sample.text);
        expect(validate(value), `seed ${seed}: ${sample.text}\n${JSON.stringify(validate.errors)}`).toBe(true);
        expect(hasFixedLayout(sample.text), `seed ${seed}: ${sample.text}`).toBe(true);
      }
      expect(finished).toBeGreaterThan(0);
    });

    it("zod 4's JSON Schema of a realistic object: every sample parses with zod itself", async () => {
      const grammar = await grammarOf(schemaGrammar(zodPersonJsonSchema));
      const validate = ajv.compile(zodPersonJsonSchema);
      for (const seed of SEEDS) {
        const { text, finished } = await generate(grammar, seed);
        expect(finished, text).toBe(true);
        const value: unknown = JSON.parse(text);
        expect(zodPerson.safeParse(value).error, text).toBeUndefined();
        expect(validate(value), `${text}\n${JSON.stringify(validate.errors)}`).toBe(true);
      }
    });

    it("tool calls with the schemas of two tools in one grammar", async () => {
      const tools = {
        get_weather: {
          type: "object",
          properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["C", "F"] } },
          required: ["city"],
        },
        add: { type: "object", properties: { a: { type: "integer" }, b: { type: "number" } }, required: ["a", "b"] },
      };
      const alternatives: string[] = [];
      const rules: string[] = [];
      for (const [index, [name, schema]] of Object.entries(tools).entries()) {
        const converted = jsonSchemaToGbnf(schema, { prefix: `tool${index}-` });
        alternatives.push(`${gbnfLiteral(`${name}", "arguments": `)} ${converted.root}`);
        rules.push(...converted.rules);
      }
      const grammar = await grammarOf(
        [
          `root ::= ${gbnfLiteral('<tool_call>\n{"name": "')} ( ${alternatives.join(" | ")} ) ${gbnfLiteral("}\n</tool_call>")}`,
          ...rules,
        ].join("\n"),
      );
      const names = new Set<string>();
      for (const seed of SEEDS) {
        const { text, finished } = await generate(grammar, seed);
        expect(finished, text).toBe(true);
        const json = /^<tool_call>\n(.*)\n<\/tool_call>$/s.exec(text)?.[1] ?? "";
        const call = JSON.parse(json) as { name: keyof typeof tools; arguments: unknown };
        expect(ajv.validate(tools[call.name], call.arguments), text).toBe(true);
        expect(hasFixedLayout(json), text).toBe(true);
        names.add(call.name);
      }
      expect(names.size).toBe(2);
    });
  });
});
