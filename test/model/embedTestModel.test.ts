import { readFile, stat } from "node:fs/promises";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import type { Llama, LlamaEmbeddingContext, LlamaModel, Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { float16BitsToNumber } from "../../src/gguf/quantizeQ8_0.js";
import { presets } from "../../src/testmodels/presets.js";
import type { BertPreset } from "../../src/testmodels/presets.js";
import { wordPieceVocabulary } from "../../src/testmodels/wordPieceVocabulary.js";
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
  const logs: string[] = [];

  beforeAll(async () => {
    path = await testModelPath("embed-tiny");
    llama = await getLlama({
      gpu: false,
      build: "never",
      maxThreads: 0,
      // Info level, to see what llama.cpp reports about the model; nothing is printed.
      logLevel: LlamaLogLevel.info,
      logger: (_level, message) => logs.push(message),
    });
    model = await llama.loadModel({ modelPath: path });
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
      const states = referenceForward(weights, tokens);
      const mean = Array.from({ length: preset.embeddingLength }, (_, d) => states.reduce((sum, state) => sum + (state[d] ?? NaN), 0) / states.length);
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

/** The model's tensors as float32 values, read from the file where llama.cpp found them. */
async function readWeights(path: string, model: LlamaModel): Promise<Map<string, Float32Array>> {
  const file = await readFile(path);
  const weights = new Map<string, Float32Array>();
  for (const tensor of model.fileInfo.tensorInfo ?? []) {
    const count = tensor.dimensions.reduce<number>((product, dim) => product * Number(dim), 1);
    const start = Number(tensor.fileOffset);
    const values = new Float32Array(count);
    for (let i = 0; i < count; i++) {
      values[i] = tensor.ggmlType === 0 ? file.readFloatLE(start + i * 4) : float16BitsToNumber(file.readUInt16LE(start + i * 2));
    }
    weights.set(tensor.name, values);
  }
  return weights;
}

/**
 * BERT's encoder written out plainly, from the tensor names alone: token + token type 0 +
 * position embeddings, layer norm, then per block bidirectional multi-head attention and a GELU
 * feed-forward network, each added back and layer-normed. Returns each token's final vector.
 */
function referenceForward(weights: Map<string, Float32Array>, tokens: readonly number[]): number[][] {
  const hidden = preset.embeddingLength;
  const headSize = hidden / preset.headCount;
  const w = (name: string): Float32Array => {
    const values = weights.get(name);
    if (values === undefined) throw new Error(`No tensor ${name}`);
    return values;
  };
  const at = (values: Float32Array, i: number): number => values[i] ?? NaN;
  /** y = W x + b for a ggml [inputs, outputs] matrix (each output's weights contiguous). */
  const linear = (name: string, x: readonly number[], outputs: number) =>
    Array.from({ length: outputs }, (_, o) => x.reduce((sum, value, i) => sum + at(w(`${name}.weight`), o * x.length + i) * value, at(w(`${name}.bias`), o)));
  const layerNorm = (name: string, x: readonly number[]) => {
    const mean = x.reduce((sum, value) => sum + value, 0) / x.length;
    const variance = x.reduce((sum, value) => sum + (value - mean) ** 2, 0) / x.length;
    const scale = 1 / Math.sqrt(variance + preset.layerNormEpsilon);
    return x.map((value, i) => (value - mean) * scale * at(w(`${name}.weight`), i) + at(w(`${name}.bias`), i));
  };
  const add = (x: readonly number[], y: readonly number[]) => x.map((value, i) => value + (y[i] ?? NaN));
  // ggml's GELU is the tanh approximation.
  const gelu = (x: number) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));

  let states = tokens.map((token, position) =>
    layerNorm(
      "token_embd_norm",
      Array.from(
        { length: hidden },
        (_, d) => at(w("token_embd.weight"), token * hidden + d) + at(w("token_types.weight"), d) + at(w("position_embd.weight"), position * hidden + d),
      ),
    ),
  );
  for (let block = 0; block < preset.blockCount; block++) {
    const prefix = `blk.${block}`;
    const queries = states.map((state) => linear(`${prefix}.attn_q`, state, hidden));
    const keys = states.map((state) => linear(`${prefix}.attn_k`, state, hidden));
    const values = states.map((state) => linear(`${prefix}.attn_v`, state, hidden));
    const attended = queries.map((query) => {
      const out = new Array<number>(hidden).fill(0);
      for (let head = 0; head < preset.headCount; head++) {
        const dims = Array.from({ length: headSize }, (_, d) => head * headSize + d);
        const scores = keys.map((key) => dims.reduce((sum, d) => sum + (query[d] ?? NaN) * (key[d] ?? NaN), 0) / Math.sqrt(headSize));
        const top = Math.max(...scores);
        const exps = scores.map((score) => Math.exp(score - top));
        const total = exps.reduce((sum, value) => sum + value, 0);
        values.forEach((value, j) => {
          for (const d of dims) out[d] = (out[d] ?? 0) + ((exps[j] ?? NaN) / total) * (value[d] ?? NaN);
        });
      }
      return out;
    });
    states = states.map((state, i) => layerNorm(`${prefix}.attn_output_norm`, add(state, linear(`${prefix}.attn_output`, attended[i] ?? [], hidden))));
    states = states.map((state) => {
      const up = linear(`${prefix}.ffn_up`, state, preset.feedForwardLength).map(gelu);
      return layerNorm(`${prefix}.layer_output_norm`, add(state, linear(`${prefix}.ffn_down`, up, hidden)));
    });
  }
  return states;
}
