import { describe, expect, it } from "vitest";
import { TokenType, testVocabulary } from "../../src/testmodels/testVocabulary.js";

describe("testVocabulary", () => {
  const vocabulary = testVocabulary();

  it("is a small byte-level BPE vocabulary with realistic English merges", () => {
    expect(vocabulary.tokens.length).toBeGreaterThanOrEqual(300);
    expect(vocabulary.tokens.length).toBeLessThanOrEqual(600);
    expect(new Set(vocabulary.tokens).size).toBe(vocabulary.tokens.length);
    // GPT-2's byte symbols come first, in GPT-2's order: "!" is 0 and a space ("Ġ") is 220.
    expect(vocabulary.tokens.slice(0, 3)).toEqual(["!", '"', "#"]);
    expect(vocabulary.tokens.indexOf("Ġ")).toBe(220);
    expect(vocabulary.merges.slice(0, 3)).toEqual(["Ġ t", "h e", "Ġt he"]);
    expect(vocabulary.tokens).toContain("Ġthe");
  });

  it("spells every merge result as a token", () => {
    const tokens = new Set(vocabulary.tokens);
    for (const merge of vocabulary.merges) {
      const [left, right, ...rest] = merge.split(" ");
      expect(rest).toEqual([]);
      expect(tokens.has(left ?? "") && tokens.has(right ?? "") && tokens.has(`${left}${right}`)).toBe(true);
    }
  });

  it("has ChatML control tokens and plain-text tool-call tokens", () => {
    const typeOf = (token: string) => vocabulary.tokenTypes[vocabulary.tokens.indexOf(token)];
    for (const token of ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) expect(typeOf(token)).toBe(TokenType.control);
    for (const token of ["<tool_call>", "</tool_call>"]) expect(typeOf(token)).toBe(TokenType.userDefined);
    expect(typeOf("Ġthe")).toBe(TokenType.normal);
    expect(vocabulary.tokens[vocabulary.eosId]).toBe("<|im_end|>");
    expect(vocabulary.tokens[vocabulary.bosId]).toBe("<|endoftext|>");
  });
});
