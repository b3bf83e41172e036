// An independent computation of the generated bert models (embed-tiny, rerank-tiny): their
// weights read straight from the file, and BERT's forward pass and classification head written
// out plainly in TypeScript, to check what llama.cpp computes from them.
import { readFile } from "node:fs/promises";
import { getLlama, LlamaLogLevel, type Llama, type LlamaModel } from "node-llama-cpp";
import { float16BitsToNumber } from "../../src/gguf/quantizeQ8_0.js";
import type { BertPreset } from "../../src/testmodels/presets.js";

/** A query, and documents the rerank tests score against it: some share its words, one is empty. */
export const RERANK_QUERY = "Where can I read books in the city?";
export const RERANK_DOCUMENTS = [
  "The library opens at nine o'clock.",
  "A dog plays by the sea.",
  "Cheap flights to Paris",
  "Reading books every day builds a larger vocabulary.",
  "42",
  "",
];

/** The model's tensors as float32 values, read from the file where llama.cpp found them. */
export async function readWeights(path: string, model: LlamaModel): Promise<Map<string, Float32Array>> {
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
export function referenceForward(preset: BertPreset, weights: Map<string, Float32Array>, tokens: readonly number[]): number[][] {
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
    Array.from({ length: outputs }, (_, o) =>
      x.reduce((sum, value, i) => sum + at(w(`${name}.weight`), o * x.length + i) * value, at(w(`${name}.bias`), o)),
    );
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
        (_, d) =>
          at(w("token_embd.weight"), token * hidden + d) +
          at(w("token_types.weight"), d) +
          at(w("position_embd.weight"), position * hidden + d),
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
    states = states.map((state, i) =>
      layerNorm(`${prefix}.attn_output_norm`, add(state, linear(`${prefix}.attn_output`, attended[i] ?? [], hidden))),
    );
    states = states.map((state) => {
      const up = linear(`${prefix}.ffn_up`, state, preset.feedForwardLength).map(gelu);
      return layerNorm(`${prefix}.layer_output_norm`, add(state, linear(`${prefix}.ffn_down`, up, hidden)));
    });
  }
  return states;
}

/**
 * A reranker's relevance probability from the final token vectors: the [CLS] vector through the
 * classification head as llama.cpp's rank pooling applies it for bert (llm_graph_context::
 * build_pooling: dense `cls` and tanh, then the one-output `cls.output`), then the sigmoid.
 */
export function referenceRelevance(weights: Map<string, Float32Array>, states: readonly number[][]): number {
  const cls = states[0];
  if (cls === undefined) throw new Error("No [CLS] vector");
  const w = (name: string): Float32Array => {
    const values = weights.get(name);
    if (values === undefined) throw new Error(`No tensor ${name}`);
    return values;
  };
  const hidden = cls.length;
  const dense = Array.from({ length: hidden }, (_, o) =>
    Math.tanh(cls.reduce((sum, value, i) => sum + (w("cls.weight")[o * hidden + i] ?? NaN) * value, w("cls.bias")[o] ?? NaN)),
  );
  const logit = dense.reduce((sum, value, i) => sum + (w("cls.output.weight")[i] ?? NaN) * value, w("cls.output.bias")[0] ?? NaN);
  return 1 / (1 + Math.exp(-logit));
}

/**
 * A llama.cpp instance that keeps what llama.cpp logs at info level (nothing is printed), and a
 * generated model loaded in it, so a test can check what llama.cpp read from the file.
 */
export async function loadWithLogs(path: string): Promise<{ llama: Llama; model: LlamaModel; logs: string[] }> {
  const logs: string[] = [];
  const llama = await getLlama({
    gpu: false,
    build: "never",
    maxThreads: 0,
    logLevel: LlamaLogLevel.info,
    logger: (_level, message) => logs.push(message),
  });
  return { llama, model: await llama.loadModel({ modelPath: path }), logs };
}
