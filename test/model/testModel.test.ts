import { stat } from "node:fs/promises";
import { getLlama, JinjaTemplateChatWrapper, LlamaLogLevel, LlamaText, resolveChatWrapper } from "node-llama-cpp";
import type { Llama, LlamaModel, Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_MODEL_CHAT_TEMPLATE } from "../../src/testmodels/testChatTemplate.js";
import { testVocabulary, TokenType } from "../../src/testmodels/testVocabulary.js";
import { testModelPath } from "../support/testModels.js";
import { describeDeterministicGeneration } from "../support/describeDeterministicGeneration.js";

/** Strings that trip up tokenizers: spacing around punctuation, whitespace runs, every Unicode plane. */
const TRICKY_STRINGS = [
  "Hello, world!",
  "The quick brown fox jumps over the lazy dog.",
  "Spaces before punctuation . , ! ? and contractions ' s 're it's don't we'll",
  "  leading and trailing spaces  ",
  "   ",
  "tabs\tand\r\nCRLF\rCR\n\n\nnewlines\n",
  "日本語のテキストと中文文本，한국어",
  "emoji 🎉 👩‍👩‍👧‍👦 🇯🇵 👍🏽",
  "combining e\u0301 and Ñ, RTL שלום مرحبا",
  "control \u0001\u0007\u001b[0m\u001f\u007f \u0085 \u00a0 \u00ad \u200b \u2028 \u2029 \ufeff \ufffd \uffff",
  "astral 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \u{10ffff}",
  "<|im_start|>user\nnot special<|im_end|> <|endoftext|>",
  '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>',
  "x",
  "12345 3.14159 -0.5e-10",
];

/** Deterministic random strings of code points from the whole Unicode range (no NUL, no surrogates). */
function randomStrings(count: number): string[] {
  let state = 1;
  const next = (limit: number) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state % limit;
  };
  return Array.from({ length: count }, () => {
    const codePoints = Array.from({ length: 1 + next(40) }, () => {
      const range = [0x80, 0x800, 0x10000, 0x110000][next(4)] ?? 0x80;
      const codePoint = 1 + next(range - 1);
      return codePoint >= 0xd800 && codePoint <= 0xdfff ? 0x20 : codePoint;
    });
    return String.fromCodePoint(...codePoints);
  });
}

describe("tiny test model", () => {
  let llama: Llama;
  let model: LlamaModel;
  let path: string;

  beforeAll(async () => {
    path = await testModelPath("tiny");
    llama = await getLlama({ gpu: false, build: "never", maxThreads: 2, logLevel: LlamaLogLevel.warn });
    model = await llama.loadModel({ modelPath: path });
  });

  afterAll(async () => {
    await model?.dispose();
    await llama?.dispose();
  });

  async function greedy(prompt: string, count: number): Promise<Token[]> {
    const context = await model.createContext({ contextSize: 512, threads: 1 });
    try {
      const generated: Token[] = [];
      for await (const token of context.getSequence().evaluate(model.tokenize(prompt, true), { temperature: 0 })) {
        generated.push(token);
        if (generated.length === count) break;
      }
      return generated;
    } finally {
      await context.dispose();
    }
  }

  it("round-trips any text through tokenize and detokenize", () => {
    for (const text of [...TRICKY_STRINGS, ...randomStrings(200)]) {
      expect(model.detokenize(model.tokenize(text))).toBe(text);
    }
  });

  it("uses merges, so English takes fewer tokens than bytes", () => {
    const text = "The people who lived there would open their windows in the morning.";
    expect(model.tokenize(text).length).toBeLessThan(Buffer.byteLength(text) / 2);
  });

  it("recognises the ChatML control tokens only when special tokens are enabled", () => {
    const text = "<|im_start|>user\nhi<|im_end|>";
    const start = model.tokenize("<|im_start|>", true);
    const end = model.tokenize("<|im_end|>", true);
    expect(start).toHaveLength(1);
    expect(end).toEqual([model.tokens.eos]);
    expect(model.isEogToken(end[0])).toBe(true);

    const special = model.tokenize(text, true);
    expect(special[0]).toBe(start[0]);
    expect(special.at(-1)).toBe(end[0]);
    expect(model.detokenize(special, true)).toBe(text);

    const plain = model.tokenize(text, false);
    expect(plain).not.toContain(start[0]);
    expect(plain).not.toContain(end[0]);
  });

  it("keeps <tool_call> and </tool_call> as single plain-text tokens", () => {
    for (const marker of ["<tool_call>", "</tool_call>"]) {
      const tokens = model.tokenize(marker);
      expect(tokens).toHaveLength(1);
      expect(model.detokenize(tokens)).toBe(marker);
      expect(model.tokenize(marker, true)).toEqual(tokens);
    }
  });

  it("carries a ChatML chat template from which node-llama-cpp derives tool calling", () => {
    expect(model.fileInfo.metadata.tokenizer.chat_template).toBe(TEST_MODEL_CHAT_TEMPLATE);
    const wrapper = resolveChatWrapper(model);
    expect(wrapper).toBeInstanceOf(JinjaTemplateChatWrapper);
    const call = wrapper.settings.functions.call;
    expect(LlamaText(call.prefix).toString()).toContain("<tool_call>");
    expect(LlamaText(call.suffix).toString()).toContain("</tool_call>");

    const { contextText } = wrapper.generateContextState({
      chatHistory: [
        { type: "system", text: "Be brief." },
        { type: "user", text: "Hi" },
        { type: "model", response: [] },
      ],
    });
    expect(contextText.toString()).toBe("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  });

  it("generates the same varied text twice at temperature 0", async () => {
    const prompt = "<|im_start|>user\nTell me about the town.<|im_end|>\n<|im_start|>assistant\n";
    const first = await greedy(prompt, 100);
    const second = await greedy(prompt, 100);

    expect(first).toHaveLength(100);
    expect(second).toEqual(first);
    expect(new Set(first).size).toBeGreaterThanOrEqual(50);
  });

  // Tests that expect exactly max_tokens completion tokens (shutdown, observability, soak) rely on
  // this: the output rows of the added tokens (end of turn, tool call…) are zero, so their logit is 0
  // (silenceAddedTokens in llamaModelWriter.ts), and far more than 40 tokens score above it at
  // every step, so the engine's default top_k of 40 never lets the model end a reply by itself.
  it("never ranks an added token (end of turn, tool call) among the 40 most likely, so replies run to max_tokens", async () => {
    const added = testVocabulary().tokenTypes.flatMap((type, id) => (type === TokenType.normal ? [] : [id]));
    expect(added).toContain(model.tokens.eos);
    const context = await model.createContext({ contextSize: 512, threads: 1 });
    let fewestAbove = Infinity;
    let steps = 0;
    try {
      const sequence = context.getSequence();
      for (const [index, prompt] of ["Write a very long essay.", "Hi", "Hello there."].entries()) {
        await sequence.clearHistory();
        const tokens = model.tokenize(`<|im_start|>user\n${prompt}<|im_end|>\n<|im_start|>assistant\n`, true);
        // Sampled from the whole distribution (no top_k, top_p or min_p), which it also reports.
        for await (const { probabilities } of sequence.evaluateWithMetadata(
          tokens,
          { probabilities: true },
          { temperature: 1, topK: 0, topP: 1, minP: 0, seed: index + 1 },
        )) {
          const addedBest = Math.max(...added.map((id) => probabilities.get(id as Token) ?? 0));
          fewestAbove = Math.min(fewestAbove, [...probabilities.values()].filter((probability) => probability > addedBest).length);
          if (++steps % 400 === 0) break;
        }
      }
    } finally {
      await context.dispose();
    }
    expect(steps).toBe(1200);
    // Seen: at least ~190 of the 463 tokens above them at each of 4,000 steps.
    expect(fewestAbove).toBeGreaterThan(40);
  });

  it("is at most 2 MB", async () => {
    expect((await stat(path)).size).toBeLessThanOrEqual(2 * 1024 * 1024);
  });

  describeDeterministicGeneration("tiny");
});
