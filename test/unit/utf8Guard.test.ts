import fc from "fast-check";
import type { Token } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { Utf8Guard, Utf8Tables, utf8Shape } from "../../src/engine/Utf8Guard.js";
import type { NativeSampler, NativeSamplerConfig } from "../../src/engine/llamaInternals.js";

const hex = (text: string) => text.split(" ").map((byte) => parseInt(byte, 16));
const fatal = new TextDecoder("utf-8", { fatal: true });

describe("utf8Shape", () => {
  it.each([
    ["41 42", {}],
    ["e7 8a a7", {}],
    ["c3", {}],
    ["41 e0", { endsWithLead: 0xe0 }],
    ["ed", { endsWithLead: 0xed }],
    ["f0", { endsWithLead: 0xf0 }],
    ["f4", { endsWithLead: 0xf4 }],
    ["e0 a0", {}],
    ["f0 9f 98", {}],
    ["9f b9", { first: 0x9f }],
    ["80 80 80 41", { first: 0x80 }],
    ["a9 e0", { first: 0xa9, endsWithLead: 0xe0 }],
  ])("%s is %j", (bytes, shape) => {
    expect(utf8Shape(hex(bytes))).toEqual(shape);
  });

  it.each([
    ["e0 9f b9", "an overlong form of U+07F9"],
    ["e0 80", "the start of an overlong NUL"],
    ["c0 80", "an overlong NUL"],
    ["c1", "a lead UTF-8 never uses"],
    ["f5", "a lead past U+10FFFF"],
    ["ff", "a byte UTF-8 never uses"],
    ["ed a0 80", "a surrogate"],
    ["f0 8f", "the start of an overlong 4-byte form"],
    ["f4 90", "the start of a code point past U+10FFFF"],
    ["80 80 80 80", "four continuation bytes"],
    ["c3 a9 a9", "a continuation byte after a whole character"],
    ["e2 41", "a character cut short"],
  ])("%s is invalid: %s", (bytes) => {
    expect(utf8Shape(hex(bytes))).toBe("invalid");
  });
});

/** The bytes of a vocabulary: every single byte, and the given multi-byte tokens. */
function vocabulary(extra: number[][]): Array<readonly [Token, readonly number[]]> {
  return [...Array.from({ length: 256 }, (_, byte) => [byte]), ...extra].map((bytes, token) => [token as Token, bytes] as const);
}

/**
 * What llama.cpp's grammar enforces of UTF-8 by itself (`decode_utf8` and the partial-character
 * check in llama-grammar.cpp): continuation bytes exactly where the lead byte before them asks for
 * them, a lead's length read from its high bits (F8–FF as 4-byte leads), and a C0 or C1 left
 * open at a token's end refused. Nothing checks the code point's range.
 */
function grammarAccepts(
  pending: number,
  lead: number | undefined,
  bytes: readonly number[],
): { pending: number; lead: number | undefined } | undefined {
  let remain = pending;
  let open = lead;
  for (const byte of bytes) {
    const continuation = (byte & 0xc0) === 0x80;
    if (remain > 0) {
      if (!continuation) return undefined;
      remain--;
    } else {
      if (continuation) return undefined;
      remain = byte < 0x80 ? 0 : byte < 0xe0 ? 1 : byte < 0xf0 ? 2 : 3;
      open = byte;
    }
  }
  if (remain === 1 && (open === 0xc0 || open === 0xc1)) return undefined;
  return { pending: remain, lead: open };
}

describe("Utf8Tables", () => {
  it("never bans a token of valid UTF-8 text, wherever the text is cut into tokens", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "binary", minLength: 1, maxLength: 12 }),
        fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 12 }),
        (text, cuts) => {
          const bytes = [...Buffer.from(text, "utf8")];
          const tokens: number[][] = [];
          for (let at = 0, i = 0; at < bytes.length; i++) {
            const length = cuts[i % cuts.length]!;
            tokens.push(bytes.slice(at, at + length));
            at += length;
          }
          const tables = new Utf8Tables(tokens.map((token, index) => [index as Token, token] as const));
          expect(tables.invalid).toHaveLength(0);
          for (let index = 1; index < tokens.length; index++) {
            const lead = tables.leadEnding.get((index - 1) as Token);
            if (lead !== undefined) expect([...tables.notAfter.get(lead)!]).not.toContain(index);
          }
        },
      ),
    );
  });

  it("with the grammar's own checks, lets only valid UTF-8 through", () => {
    const extra = [
      hex("e0 9f b9"),
      hex("c0 80"),
      hex("9f b9"),
      hex("a0 80"),
      hex("41 e0"),
      hex("ed a0 80"),
      hex("f0 9f 98 80"),
      hex("f4 90 80 80"),
      hex("e7 8a a7"),
    ];
    const tables = new Utf8Tables(vocabulary(extra));
    const all = vocabulary(extra);
    const invalid = new Set(tables.invalid);
    fc.assert(
      fc.property(fc.array(fc.nat(), { minLength: 1, maxLength: 40 }), (choices) => {
        // A random walk over the tokens both the grammar and the guard allow at each step.
        const output: number[] = [];
        let state: { pending: number; lead: number | undefined } = { pending: 0, lead: undefined };
        let after: number | undefined;
        for (const choice of choices) {
          const banned = new Set([...invalid, ...(after !== undefined ? tables.notAfter.get(after)! : [])]);
          const allowed = all.filter(
            ([token, bytes]) => !banned.has(token) && grammarAccepts(state.pending, state.lead, bytes) !== undefined,
          );
          const [token, bytes] = allowed[choice % allowed.length]!;
          state = grammarAccepts(state.pending, state.lead, bytes)!;
          after = tables.leadEnding.get(token);
          output.push(...bytes);
        }
        // Whatever is complete is valid UTF-8 (the end may still be inside a character).
        expect(() =>
          fatal.decode(Uint8Array.from(output.slice(0, output.length - (state.pending > 0 ? lengthOfOpenCharacter(output) : 0)))),
        ).not.toThrow();
      }),
      { numRuns: 300 },
    );
  });
});

/** How many bytes of an unfinished character end `bytes`. */
function lengthOfOpenCharacter(bytes: readonly number[]): number {
  let length = 1;
  while ((bytes[bytes.length - length]! & 0xc0) === 0x80) length++;
  return length;
}

describe("Utf8Guard", () => {
  const tables = new Utf8Tables(vocabulary([]));
  const recording = () => {
    const configs: NativeSamplerConfig[] = [];
    const sampler: NativeSampler = { applyConfig: (config) => configs.push(config), dispose: () => {} };
    return { sampler, configs };
  };
  const bans = (config: NativeSamplerConfig) =>
    [...(config.tokenBiasKeys ?? [])].filter((_, index) => config.tokenBiasValues![index] === -Infinity);
  const base: NativeSamplerConfig = { temperature: 0.8, topK: 40, topP: 1, minP: 0, seed: 7 };

  it("bans what no context allows, and after E0 what E0 does not allow next, for one token", () => {
    const guard = new Utf8Guard(tables, base);
    expect(bans(guard.config).sort((a, b) => a - b)).toEqual([
      0xc0, 0xc1, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff,
    ]);
    expect(guard.pauseTokens.sort((a, b) => a - b)).toEqual([0xe0, 0xed, 0xf0, 0xf4]);
    const { sampler, configs } = recording();
    expect(guard.sampled(sampler, 0x41 as Token)).toBe(false);
    expect(configs).toHaveLength(0);
    // After E0: 80–9F would make an overlong form.
    expect(guard.sampled(sampler, 0xe0 as Token)).toBe(true);
    expect(bans(configs[0]!)).toEqual(expect.arrayContaining(Array.from({ length: 0x20 }, (_, i) => 0x80 + i)));
    expect(bans(configs[0]!)).not.toContain(0xa0);
    // After the next token, back to the bans of any position.
    expect(guard.sampled(sampler, 0xa0 as Token)).toBe(false);
    expect(configs[1]).toEqual(guard.config);
  });

  it("keeps the request's own biases and the penalty history the sampler keeps", () => {
    const config: NativeSamplerConfig = {
      ...base,
      tokenBiasKeys: Uint32Array.of(5, 0xc0),
      tokenBiasValues: Float32Array.of(2, 3),
      repeatPenalty: 1.1,
      repeatPenaltyMaxTokens: 3,
      repeatPenaltyTokens: Uint32Array.of(1, 2),
    };
    const guard = new Utf8Guard(tables, config);
    expect([...guard.config.tokenBiasKeys!.slice(0, 2)]).toEqual([5, 0xc0]);
    expect([...guard.config.tokenBiasValues!.slice(0, 2)]).toEqual([2, -Infinity]);
    const { sampler, configs } = recording();
    guard.sampled(sampler, 3 as Token);
    guard.sampled(sampler, 0xed as Token);
    expect([...configs[0]!.repeatPenaltyTokens!]).toEqual([2, 3, 0xed]);
    expect(bans(configs[0]!)).toEqual(expect.arrayContaining(Array.from({ length: 0x20 }, (_, i) => 0xa0 + i)));
    expect(configs[0]!.seed).toBe(7);
  });
});
