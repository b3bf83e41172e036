import type { Token } from "node-llama-cpp";
import type { NativeSampler, NativeSamplerConfig } from "./llamaInternals.js";

/**
 * Keeps a grammar-constrained generation valid UTF-8.
 *
 * llama.cpp's grammar reads a token's bytes with a lenient UTF-8 decoder (`decode_utf8` in
 * llama-grammar.cpp). It turns a lead byte and its continuation bytes into a code point without
 * checking the code point's range, so these pass as one character each:
 * - an overlong form, such as E0 9F B9 for U+07F9;
 * - a surrogate, such as ED A0 80;
 * - a code point past U+10FFFF (F4 90 …);
 * - a lead byte that UTF-8 never uses (C0, C1, F5–FF).
 *
 * Worse, an overlong NUL (C0 80) decodes to 0, which the grammar takes as the token's end, so the
 * bytes after it go unchecked. The grammar does enforce that continuation bytes come where a
 * character needs them and nowhere else.
 *
 * A model with byte tokens can write such bytes. A JSON string holding them decodes to U+FFFD, which
 * can break its schema: 犧inCeople plus E0 9F B9 met `maxLength: 10` for the grammar, but is 12
 * characters as text. The tiny test model did this for 5 seeds in 2,000 at temperature 0.8.
 *
 * For a grammar-constrained generation, the guard bans (with a -∞ logit bias) two kinds of token:
 * - always: the tokens that no context makes valid;
 * - right after a token that ends in one of the four lead bytes whose second byte has a narrower
 *   range (E0, ED, F0, F4), the tokens whose first byte is outside that range.
 *
 * Those lead-ending tokens are rare: byte tokens, and the few merges that end mid-character. After
 * one, the sampler's bans change twice, so the next token is sampled by a step of its own, outside
 * the native loop, which stops after the lead-ending token as it does after an end token.
 */
export class Utf8Tables {
  /** Tokens invalid wherever they stand. */
  readonly invalid: Uint32Array;
  /** Tokens ending in a bare E0, ED, F0 or F4: the lead byte they end in. */
  readonly leadEnding: ReadonlyMap<Token, number>;
  /** For each of those leads, the tokens starting with a continuation byte it does not allow next. */
  readonly notAfter: ReadonlyMap<number, Uint32Array>;

  constructor(tokens: Iterable<readonly [Token, readonly number[]]>) {
    const invalid: number[] = [];
    const leadEnding = new Map<Token, number>();
    const notAfter = new Map<number, number[]>([...SECOND_BYTE_RANGE.keys()].map((lead) => [lead, []]));
    for (const [token, bytes] of tokens) {
      const shape = utf8Shape(bytes);
      if (shape === "invalid") {
        invalid.push(token);
        continue;
      }
      if (shape.endsWithLead !== undefined) leadEnding.set(token, shape.endsWithLead);
      if (shape.first !== undefined) {
        for (const [lead, [low, high]] of SECOND_BYTE_RANGE) if (shape.first < low || shape.first > high) notAfter.get(lead)!.push(token);
      }
    }
    this.invalid = Uint32Array.from(invalid);
    this.leadEnding = leadEnding;
    this.notAfter = new Map([...notAfter].map(([lead, list]) => [lead, Uint32Array.from(list)]));
  }
}

/** The leads whose second byte is narrower than 80–BF (RFC 3629's table), with that range. */
const SECOND_BYTE_RANGE: ReadonlyMap<number, readonly [number, number]> = new Map([
  [0xe0, [0xa0, 0xbf]], // below: overlong
  [0xed, [0x80, 0x9f]], // above: surrogates
  [0xf0, [0x90, 0xbf]], // below: overlong
  [0xf4, [0x80, 0x8f]], // above: past U+10FFFF
]);

const isContinuation = (byte: number) => (byte & 0xc0) === 0x80;

/**
 * A token's bytes as UTF-8, where the token may continue a character begun before it and may end
 * inside one:
 * - `first`: its first byte, when that is a continuation byte;
 * - `endsWithLead`: the lead it ends in, when that is one of SECOND_BYTE_RANGE's and nothing follows it;
 * - "invalid": no context makes the bytes valid UTF-8.
 */
export function utf8Shape(bytes: readonly number[]): "invalid" | { first?: number; endsWithLead?: number } {
  let at = 0;
  // Continuation bytes first: the end of a character an earlier token began (at most 3 of them).
  while (at < bytes.length && isContinuation(bytes[at]!)) at++;
  if (at > 3) return "invalid";
  const shape = at > 0 ? { first: bytes[0]! } : {};
  while (at < bytes.length) {
    const lead = bytes[at]!;
    const length =
      lead < 0x80 ? 1 : lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
    if (length === 0) return "invalid";
    const [low, high] = SECOND_BYTE_RANGE.get(lead) ?? [0x80, 0xbf];
    for (let next = 1; next < length; next++) {
      // The character goes on in the next token.
      if (at + next === bytes.length) return next === 1 && SECOND_BYTE_RANGE.has(lead) ? { ...shape, endsWithLead: lead } : shape;
      const byte = bytes[at + next]!;
      if (!isContinuation(byte) || (next === 1 && (byte < low || byte > high))) return "invalid";
    }
    at += length;
  }
  return shape;
}

/**
 * One generation's guard: the sampler configuration with the bans, changed after a lead-ending
 * token and back after the next. It keeps the penalty history the sampler keeps, so that applying a
 * configuration again changes the bans and nothing else.
 */
export class Utf8Guard {
  readonly #tables: Utf8Tables;
  readonly #config: NativeSamplerConfig;
  readonly #history: number[] | undefined;
  /** The lead whose bans apply to the next token, if any. */
  #after: number | undefined;

  constructor(tables: Utf8Tables, config: NativeSamplerConfig) {
    this.#tables = tables;
    this.#config = config;
    this.#history = config.repeatPenaltyTokens ? [...config.repeatPenaltyTokens] : undefined;
  }

  /** The configuration the sampler starts with. */
  get config(): NativeSamplerConfig {
    return this.#configured(undefined);
  }

  /** The tokens after which the native loop stops, so that the guard can change the bans. */
  get pauseTokens(): Token[] {
    return [...this.#tables.leadEnding.keys()];
  }

  /**
   * Called with each sampled token while the sampler is idle, before the next step. True when the
   * next token must be sampled by a step of its own (the bans change again after it).
   */
  sampled(sampler: NativeSampler, token: Token): boolean {
    if (this.#history) {
      this.#history.push(token);
      const window = this.#config.repeatPenaltyMaxTokens ?? Infinity;
      if (this.#history.length > window) this.#history.splice(0, this.#history.length - window);
    }
    const after = this.#tables.leadEnding.get(token);
    if (after !== this.#after) {
      this.#after = after;
      sampler.applyConfig(this.#configured(after));
    }
    return after !== undefined;
  }

  #configured(after: number | undefined): NativeSamplerConfig {
    const banned = new Set<number>(this.#tables.invalid);
    if (after !== undefined) for (const token of this.#tables.notAfter.get(after)!) banned.add(token);
    // The request's own biases first, in their order; a ban of the guard's overrides a bias.
    const keys: number[] = [];
    const values: number[] = [];
    const own = this.#config.tokenBiasKeys ?? [];
    own.forEach((token, index) => {
      keys.push(token);
      values.push(banned.delete(token) ? -Infinity : this.#config.tokenBiasValues![index]!);
    });
    for (const token of banned) {
      keys.push(token);
      values.push(-Infinity);
    }
    const config: NativeSamplerConfig = {
      ...this.#config,
      ...(this.#history ? { repeatPenaltyTokens: Uint32Array.from(this.#history) } : {}),
    };
    if (keys.length === 0) return config;
    return { ...config, tokenBiasKeys: Uint32Array.from(keys), tokenBiasValues: Float32Array.from(values) };
  }
}
