import { stat } from "node:fs/promises";
import type { Llama, LlamaEmbeddingContext, LlamaModel, Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { presets } from "../../src/testmodels/presets.js";
import type { BertPreset } from "../../src/testmodels/presets.js";
import { wordPieceVocabulary } from "../../src/testmodels/wordPieceVocabulary.js";
import { loadWithLogs, readWeights, referenceForward } from "../support/referenceBert.js";
import { testModelPath } from "../support/testModels.js";
import { describeDeterministicGeneration } from "../support/describeDeterministicGeneration.js";

const preset: BertPreset = (() => {
  const embedTiny = presets["embed-tiny"];
  if (embedTiny.kind !== "bert") throw new Error("embed-tiny should be a bert preset");
  return embedTiny;
})();

/** Distinct sentences, some sharing words, one differing only in punctuation. */
const SENTENCES = [
  "The library opens at nine o'clock.",
  "A dog plays by the sea.",
  "Cheap flights to Paris",
  "Inexpensive air travel",
  "hello world",
  "hello world!",
  "Reading books every day builds a larger vocabulary.",
  "42",
];

function l2Normalize(vector: readonly number[]): number[] {
  const norm = Math.hypot(...vector);
  return vector.map((value) => value / norm);
}

function cosine(a: readonly number[], b: readonly number[]): number {
  const [x, y] = [l2Normalize(a), l2Normalize(b)];
  return x.reduce((sum, value, i) => sum + value * (y[i] ?? NaN), 0);
}

describe("embed-tiny vocabulary", () => {
  const vocabulary = wordPieceVocabulary();

  it("starts with BERT's control tokens and spells every token once", () => {
    expect(vocabulary.pieces.slice(0, 5)).toEqual(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]);
    expect([vocabulary.padId, vocabulary.unkId, vocabulary.clsId, vocabulary.sepId, vocabulary.maskId]).toEqual([0, 1, 2, 3, 4]);
    expect(new Set(vocabulary.pieces).size).toBe(vocabulary.pieces.length);
    expect(new Set(vocabulary.tokens).size).toBe(vocabulary.tokens.length);
    expect(vocabulary.tokenTypes.length).toBe(vocabulary.tokens.length);
    expect(vocabulary.tokens.length).toBeGreaterThan(400);
  });

  it("has each printable ASCII character but the capitals as a word start and a continuation", () => {
    for (let code = 0x21; code <= 0x7e; code++) {
      const character = String.fromCharCode(code);
      const expected = character >= "A" && character <= "Z" ? false : true;
      expect(vocabulary.pieces.includes(character)).toBe(expected);
      expect(vocabulary.pieces.includes(`##${character}`)).toBe(expected);
    }
  });

  it("learns common English words and subwords", () => {
    for (const piece of ["the", "and", "of", "people", "library", "##ing", "##ed"]) expect(vocabulary.pieces).toContain(piece);
  });

  it("stores tokens in llama.cpp's phantom-space spelling", () => {
    const tokenOf = (piece: string) => vocabulary.tokens[vocabulary.pieces.indexOf(piece)];
    expect(tokenOf("the")).toBe("\u2581the");
    expect(tokenOf("##ing")).toBe("ing");
    expect(tokenOf("###")).toBe("#");
    expect(tokenOf("#")).toBe("\u2581#");
    expect(tokenOf("[CLS]")).toBe("[CLS]");
  });
});

describe("embed-tiny test model", () => {
  let llama: Llama;
  let model: LlamaModel;
  let context: LlamaEmbeddingContext;
  let path: string;
  let logs: string[];

  beforeAll(async () => {
    path = await testModelPath("embed-tiny");
    ({ llama, model, logs } = await loadWithLogs(path));
    context = await model.createEmbeddingContext({ contextSize: 512, threads: 1 });
  });

  afterAll(async () => {
    await context?.dispose();
    await model?.dispose();
    await llama?.dispose();
  });

  async function embed(text: string): Promise<readonly number[]> {
    return (await context.getEmbeddingFor(text)).vector;
  }

  it("is a bert model with mean pooling and bidirectional attention", () => {
    const metadata = model.fileInfo.metadata;
    expect(metadata.general.architecture).toBe("bert");
    expect(model.fileInfo.architectureMetadata.pooling_type).toBe(1);
    // What llama.cpp itself read from the file (print_info); node-llama-cpp exposes no pooling getter.
    const log = logs.join("\n");
    expect(log).toMatch(/^print_info: pooling type += 1$/m);
    expect(log).toMatch(/^print_info: causal attn += 0$/m);
    expect(log).toMatch(/^print_info: vocab type += WPM$/m);
    expect(model.vocabularyType).toBe("wpm");
  });

  it("gives vectors of the hidden size, finite, the same for the same text", async () => {
    for (const text of SENTENCES) {
      const vector = await embed(text);
      expect(vector).toHaveLength(preset.embeddingLength);
      expect(model.embeddingVectorSize).toBe(preset.embeddingLength);
      expect(vector.every(Number.isFinite)).toBe(true);
      expect(await embed(text)).toEqual(vector);
    }
  });

  it("gives clearly different vectors for different texts", async () => {
    const vectors = await Promise.all(SENTENCES.map((text) => embed(text)));
    for (let i = 0; i < vectors.length; i++) {
      for (let j = i + 1; j < vectors.length; j++) {
        expect(cosine(vectors[i] ?? [], vectors[j] ?? []), `${SENTENCES[i]} / ${SENTENCES[j]}`).toBeLessThan(0.99);
      }
    }
  });

  it("matches a reference BERT forward pass with mean pooling over [CLS] ... [SEP]", async () => {
    const weights = await readWeights(path, model);
    for (const text of SENTENCES.slice(0, 3)) {
      const tokens = [model.tokens.bos, ...model.tokenize(text), model.tokens.sep] as Token[];
      expect(tokens[0]).toBe(wordPieceVocabulary().clsId);
      const states = referenceForward(preset, weights, tokens);
      const mean = Array.from(
        { length: preset.embeddingLength },
        (_, d) => states.reduce((sum, state) => sum + (state[d] ?? NaN), 0) / states.length,
      );
      const actual = await embed(text);
      // F16 weights, and llama.cpp rounds activations to F16 for F16 matrix products.
      actual.forEach((value, d) => expect(value).toBeCloseTo(mean[d] ?? NaN, 2));
      // The [CLS] vector alone (CLS pooling) is something else.
      expect(cosine(actual, states[0] ?? [])).toBeLessThan(0.9);
    }
  });

  it("tokenizes like uncased BERT: [CLS] and [SEP] around, lower-cased, accents stripped, [UNK] per unknown word", () => {
    const vocabulary = wordPieceVocabulary();
    expect(model.tokens.bos).toBe(vocabulary.clsId);
    expect(model.tokens.sep).toBe(vocabulary.sepId);
    expect(model.tokenize("[CLS] [SEP]", true)).toEqual([vocabulary.clsId, vocabulary.sepId]);

    const tokens = model.tokenize("Hello 🎉 WÖRLD 日本 café!");
    expect(tokens.filter((token) => token === vocabulary.unkId)).toHaveLength(3); // 🎉, 日, 本
    expect(tokens.filter((token) => token !== vocabulary.unkId)).toEqual(model.tokenize("hello world cafe!"));
    expect(model.detokenize(tokens)).toBe(" hello world cafe!");
    expect(model.detokenize(tokens, true)).toBe(" hello[UNK] world[UNK][UNK] cafe!");
    expect(model.tokenize("the library")).toHaveLength(2);
  });

  it("embeds text with unknown characters", async () => {
    const vector = await embed("Hello 🎉 wörld 日本");
    expect(vector.every(Number.isFinite)).toBe(true);
    expect(cosine(vector, await embed("hello world"))).toBeLessThan(0.99);
  });

  it("is at most 2 MB", async () => {
    expect((await stat(path)).size).toBeLessThanOrEqual(2 * 1024 * 1024);
  });

  describeDeterministicGeneration("embed-tiny");
});
