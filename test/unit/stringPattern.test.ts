import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { FORMAT_PATTERNS, PatternError, SHORT_FORMAT_PATTERNS, parsePattern, stringAutomaton } from "../../src/core/stringPattern.js";
import type { StringAutomaton } from "../../src/core/stringPattern.js";
import { FORMATS } from "../support/formatChecks.js";

function isFormat(format: string, text: string): boolean {
  const check = FORMATS[format];
  if (!check) throw new Error(`no check for ${format}`);
  return check(text);
}

/** Whether the automaton accepts the whole text (run on sets of states). */
function accepts(automaton: StringAutomaton, text: string): boolean {
  let current = new Set([0]);
  for (const character of text) {
    const code = character.codePointAt(0) as number;
    const next = new Set<number>();
    for (const state of current) {
      for (const { set, to } of automaton.states[state]?.moves ?? []) {
        if (set.some(([lo, hi]) => code >= lo && code <= hi)) next.add(to);
      }
    }
    current = next;
  }
  return [...current].some((state) => automaton.states[state]?.accepting);
}

/** A random string of the automaton: a walk that stops at an accepting state with probability 1/4. */
function sample(automaton: StringAutomaton, random: () => number): string {
  let text = "";
  for (let state = 0; ;) {
    const { accepting, moves } = automaton.states[state] as StringAutomaton["states"][number];
    if (moves.length === 0 || (accepting && random() < 0.25)) return text;
    const { set, to } = moves[Math.floor(random() * moves.length)] as (typeof moves)[number];
    const [lo, hi] = set[Math.floor(random() * set.length)] as readonly [number, number];
    text += String.fromCodePoint(lo + Math.floor(random() * (hi - lo + 1)));
    state = to;
  }
}

function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state / 2 ** 32;
  };
}

/** Patterns with an alphabet of characters that exercise them (plus a few that do not occur). */
const PATTERNS: [string, string][] = [
  ["^[a-c]+$", "abcd"],
  ["^a{2,3}(b|cd)?$", "abcd"],
  ["^(?:ab|a)*c$", "abc"],
  ["ab", "abx"],
  ["^ab", "abx"],
  ["ab$", "abx"],
  ["^a|b$", "abx"],
  ["^[^a-c\\d]{1,2}$", "ab1z.\n"],
  ["^\\d\\w\\s\\D\\W\\S$", "1a _ .\t\u00a0x"],
  ["^.?\\.$", ".a\n\r\u2028"],
  ["^[\\-\\]\\\\.]{2}$", "-]\\.a"],
  ["^\\x41\\u00e9[\\t-\\r]$", "Aé\t\n\r "],
  ["^(?<year>\\d{2})-?$", "12-"],
  ["^x{0}y{1,}z{2,}?$", "xyz"],
  ["^$", "a"],
  ["^a[]?$", "a"],
  ["^[^]$", "a\n"],
  ['^"\\\\?"$', '"\\'],
];

describe("stringAutomaton of a pattern", () => {
  it.each(PATTERNS)("accepts exactly what RegExp matches: %s", (pattern, alphabet) => {
    const automaton = stringAutomaton({ pattern });
    const characters = [...alphabet];
    const regexes = [new RegExp(pattern), new RegExp(pattern, "u")];
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...characters), { maxLength: 8 }), (chars) => {
        const text = chars.join("");
        for (const regex of regexes) expect(accepts(automaton, text), JSON.stringify(text)).toBe(regex.test(text));
      }),
      { numRuns: 400 },
    );
  });

  it("with minLength and maxLength: the strings of both", () => {
    const automaton = stringAutomaton({ pattern: "a+b*", minLength: 3, maxLength: 5 });
    fc.assert(
      fc.property(fc.array(fc.constantFrom("a", "b", "c"), { maxLength: 7 }), (chars) => {
        const text = chars.join("");
        expect(accepts(automaton, text)).toBe(/a+b*/.test(text) && text.length >= 3 && text.length <= 5);
      }),
    );
  });

  it.each([
    ["(?=a)", /lookaround/],
    ["(?!a)b", /lookaround/],
    ["(?<=a)b", /lookaround/],
    ["(?<!a)b", /lookaround/],
    ["(a)\\1", /backreference/],
    ["\\k<x>", /backreference/],
    ["\\bx", /word boundaries/],
    ["x\\B", /word boundaries/],
    ["\\p{L}", /Unicode property/],
    ["a^", /anchors/],
    ["$a", /anchors/],
    ["a{1001}", /above 1000/],
    ["a{3,2}", /out of order/],
    ["a{", /must be escaped/],
    ["a]", /must be escaped/],
    ["**", /nothing to repeat/],
    ["a+*", /nothing to repeat/],
    ["(a", /unterminated group/],
    ["a)", /unbalanced/],
    ["[a", /unterminated character class/],
    ["[z-a]", /out of order/],
    ["[\\d-z]", /between two characters/],
    ["🎉", /beyond U\+FFFF/],
    ["\\q", /unsupported escape/],
    ["\\", /lone backslash/],
    ["\\012", /octal/],
    ["(".repeat(51) + ")".repeat(51), /nested more than 50/],
  ])("refuses %s", (pattern, reason) => {
    expect(() => parsePattern(pattern)).toThrow(PatternError);
    expect(() => parsePattern(pattern)).toThrow(reason);
  });

  it("refuses what matches no string, and what grows too large", () => {
    expect(() => stringAutomaton({ pattern: "^[]$" })).toThrow(/matches no string/);
    expect(() => stringAutomaton({ pattern: "^a{5}$", maxLength: 4 })).toThrow(/no string satisfies/);
    expect(() => stringAutomaton({ pattern: "^(?:[ab]{0,1000}){0,1000}$" })).toThrow(/too large|too complex/);
    expect(() => stringAutomaton({ pattern: "a".repeat(10_001) })).toThrow(/longer than 10000/);
    expect(() => stringAutomaton({ pattern: "a{1000}".repeat(25) })).toThrow(/too large/);
    // Nested quantifiers, the classic catastrophic backtracking, are a small automaton.
    expect(stringAutomaton({ pattern: "^(a+)+$" }).states.length).toBeLessThanOrEqual(5);
  });
});

/**
 * zod 4's own string formats, as z.toJSONSchema writes them: format and pattern side by side.
 * Every string of the automaton must pass zod's parser (which checks the pattern), the pattern
 * as a RegExp, and an RFC check of the format.
 */
const ZOD_STRINGS = [
  ["email", z.email()],
  ["email", z.email().max(40)],
  ["uuid", z.uuid()],
  ["uuid", z.guid()],
  ["date-time", z.iso.datetime()],
  ["date-time", z.iso.datetime({ offset: true })],
  ["date", z.iso.date()],
  ["date", z.iso.date().min(10).max(10)],
] as const;

describe("format and pattern together, as zod writes them", () => {
  it.each(
    ZOD_STRINGS.map(([format, schema]) => [`${format} ${JSON.stringify(z.toJSONSchema(schema)).slice(0, 60)}…`, format, schema] as const),
  )("%s: every string satisfies zod, the pattern and the format", (_, format, schema) => {
    const json = z.toJSONSchema(schema) as { pattern: string; format: string; minLength?: number; maxLength?: number };
    expect(json.format).toBe(format);
    const patterns = json.maxLength !== undefined && json.maxLength <= 63 ? SHORT_FORMAT_PATTERNS : FORMAT_PATTERNS;
    const automaton = stringAutomaton({
      pattern: json.pattern,
      format: patterns[format],
      minLength: json.minLength,
      maxLength: json.maxLength,
    });
    const formatCheck = new RegExp(`^(?:${FORMAT_PATTERNS[format] as string})$`);
    const random = seeded(format.length);
    for (let index = 0; index < 300; index++) {
      const text = sample(automaton, random);
      expect(schema.safeParse(text).success, text).toBe(true);
      expect(new RegExp(json.pattern, "u").test(text), text).toBe(true);
      expect(isFormat(format, text), text).toBe(true);
      if (json.maxLength === undefined) expect(formatCheck.test(text), text).toBe(true);
    }
  });

  it("the format patterns match the formats' RFC checks", () => {
    for (const [format, pattern] of Object.entries({ ...FORMAT_PATTERNS, ...prefixKeys(SHORT_FORMAT_PATTERNS) })) {
      const automaton = stringAutomaton({ pattern: `^(?:${pattern})$`, maxLength: format.startsWith("short-") ? 63 : undefined });
      const random = seeded(7);
      for (let index = 0; index < 200; index++) {
        const text = sample(automaton, random);
        expect(isFormat(format.replace(/^short-/, ""), text), `${format}: ${text}`).toBe(true);
      }
    }
  });
});

function prefixKeys(record: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(record).map(([key, value]) => [`short-${key}`, value]));
}
