import { describe, expect, it } from "vitest";
import {
  fromUpstreamDetokenize,
  fromUpstreamEmbeddings,
  fromUpstreamRerank,
  fromUpstreamTokenize,
} from "../../src/protocols/openai/fromUpstreamResponse.js";
import { shareTicket } from "../../src/upstream/shareTicket.js";

// Issue 34: an upstream's replies are untrusted input, read back into the engine's results.

describe("reading an upstream's replies", () => {
  it("puts embeddings in input order, cut to the dimensions asked for and normalised again", () => {
    const reply = {
      data: [
        { index: 1, embedding: [0, 0, 1, 0] },
        { index: 0, embedding: [3, 4, 0, 12] },
      ],
      usage: { prompt_tokens: 9, total_tokens: 9 },
    };
    const { vectors, promptTokens } = fromUpstreamEmbeddings(reply, 2, 2);
    expect(vectors.map((vector) => [...vector])).toEqual([
      [expect.closeTo(0.6, 6), expect.closeTo(0.8, 6)],
      [0, 0],
    ]);
    expect(promptTokens).toBe(9);
    expect(fromUpstreamEmbeddings(reply, 2, undefined).vectors[0]).toEqual(Float32Array.from([3, 4, 0, 12]));
  });

  it("refuses a reply that is short, out of range, malformed or without usage", () => {
    const one = { data: [{ index: 0, embedding: [1] }], usage: { prompt_tokens: 1 } };
    expect(() => fromUpstreamEmbeddings(one, 2, undefined)).toThrow(/1 vectors for 2 inputs/);
    expect(() => fromUpstreamEmbeddings({ ...one, data: [{ index: 5, embedding: [1] }] }, 1, undefined)).toThrow(/index 5/);
    expect(() => fromUpstreamEmbeddings({ data: [{ index: 0, embedding: ["x"] }] }, 1, undefined)).toThrow(
      /malformed at data.0.embedding.0/,
    );
    expect(() => fromUpstreamEmbeddings({ data: one.data }, 1, undefined)).toThrow(/no usage/);
    expect(() => fromUpstreamRerank({ results: [{ index: 0, relevance_score: 1 }], usage: { total_tokens: 3 } }, 2, "probability")).toThrow(
      /scores 1 of 2 documents/,
    );
  });

  it("gives rerank scores in document order, as probabilities (a logit through the sigmoid)", () => {
    const reply = {
      results: [
        { index: 1, relevance_score: 2 },
        { index: 0, relevance_score: -1 },
      ],
      usage: { total_tokens: 14 },
    };
    expect(fromUpstreamRerank(reply, 2, "logit")).toEqual({
      scores: [expect.closeTo(1 / (1 + Math.E), 9), expect.closeTo(1 / (1 + Math.exp(-2)), 9)],
      promptTokens: 14,
    });
    expect(
      fromUpstreamRerank({ ...reply, results: reply.results.map((r) => ({ ...r, relevance_score: 0.5 })) }, 2, "probability").scores,
    ).toEqual([0.5, 0.5]);
  });

  it("reads llama-server's tokens with pieces (text, or bytes when not UTF-8 alone), vLLM's without, and both detokenize shapes", () => {
    const pieces = {
      tokens: [
        { id: 5, piece: "hé" },
        { id: 9, piece: [0xe2, 0x82] },
      ],
    };
    expect(fromUpstreamTokenize(pieces, true)).toEqual({
      tokens: [5, 9],
      pieces: [
        [0x68, 0xc3, 0xa9],
        [0xe2, 0x82],
      ],
    });
    expect(fromUpstreamTokenize(pieces, false)).toEqual({ tokens: [5, 9] });
    expect(fromUpstreamTokenize({ count: 2, max_model_len: 4096, tokens: [5, 9] }, false)).toEqual({ tokens: [5, 9] });
    // vLLM has no pieces: the caller refuses with_pieces.
    expect(fromUpstreamTokenize({ tokens: [5, 9] }, true)).toBeUndefined();
    expect(fromUpstreamDetokenize({ content: "hi" })).toBe("hi");
    expect(fromUpstreamDetokenize({ prompt: "hi" })).toBe("hi");
    expect(() => fromUpstreamDetokenize({ text: "hi" })).toThrow(/malformed/);
  });
});

describe("one admission shared by n choices", () => {
  it("settles once, when every share has, with the prompt once and every completion", () => {
    const settled: unknown[] = [];
    const shares = shareTicket({ maxOutputTokens: 30, settle: (usage) => settled.push(usage) }, 3);
    expect(shares.map((share) => share!.maxOutputTokens)).toEqual([10, 10, 10]);
    shares[0]!.settle({ promptTokens: 12, completionTokens: 4 });
    shares[0]!.settle({ promptTokens: 99, completionTokens: 99 });
    shares[2]!.settle({ promptTokens: 0, completionTokens: 0 });
    expect(settled).toEqual([]);
    shares[1]!.settle({ promptTokens: 12, completionTokens: 7 });
    expect(settled).toEqual([{ promptTokens: 12, completionTokens: 11 }]);
    expect(shareTicket(undefined, 2)).toEqual([undefined, undefined]);
  });
});
