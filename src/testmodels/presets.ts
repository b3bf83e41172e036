// Shapes of the generated test models. Each preset is a record with a `kind` naming the llama.cpp
// architecture it is written in: `llama` for the chat models, `bert` for the embedding model.

/** The shape both architectures share. */
interface TransformerShape {
  /** `general.name` */
  readonly name: string;
  /** Tokens per sequence; for bert, also the number of position embeddings. */
  readonly contextLength: number;
  /** Hidden size; for bert, also the length of the embedding vectors. */
  readonly embeddingLength: number;
  readonly blockCount: number;
  readonly feedForwardLength: number;
  readonly headCount: number;
}

/** A decoder-only model in llama.cpp's `llama` architecture. */
export interface LlamaPreset extends TransformerShape {
  readonly kind: "llama";
  /** Fewer key/value heads than query heads means grouped-query attention. */
  readonly headCountKv: number;
  readonly rmsNormEpsilon: number;
  readonly ropeFreqBase: number;
  /** Type of the embedding, attention, feed-forward and output matrices; norms are always F32. */
  readonly matrixType: "F32" | "F16" | "Q8_0";
}

/**
 * A BERT-style sentence-embedding model in llama.cpp's `bert` architecture, like all-MiniLM or
 * bge: learned position embeddings, bidirectional attention, post-layer-norm blocks with biases,
 * a GELU feed-forward network, and the token vectors pooled into one embedding.
 */
export interface BertPreset extends TransformerShape {
  readonly kind: "bert";
  readonly layerNormEpsilon: number;
  /** Rows of the token-type (segment) embedding; llama.cpp always uses row 0. */
  readonly tokenTypeCount: number;
  /** How llama.cpp turns the token vectors into one embedding: their mean, or the [CLS] token's. */
  readonly poolingType: "mean" | "cls";
  /** Type of the embedding, attention and feed-forward matrices; norms and biases are always F32. */
  readonly matrixType: "F32" | "F16";
}

export type TestModelPreset = LlamaPreset | BertPreset;

export type TestModelPresetName = "tiny" | "bench" | "embed-tiny";

export const presets: Readonly<Record<TestModelPresetName, TestModelPreset>> = {
  /** For tests: loads and decodes in milliseconds; about 160k parameters, well under 1 MB. */
  tiny: {
    kind: "llama",
    name: "modelhost tiny test model",
    contextLength: 4096,
    embeddingLength: 64,
    blockCount: 2,
    feedForwardLength: 192,
    headCount: 4,
    headCountKv: 2,
    rmsNormEpsilon: 1e-5,
    ropeFreqBase: 10000,
    matrixType: "F16",
  },
  /** For benchmarks: GPT-2-small-like shapes, about 110M parameters in Q8_0 (about 120 MB). */
  bench: {
    kind: "llama",
    name: "modelhost bench test model",
    contextLength: 4096,
    embeddingLength: 768,
    blockCount: 12,
    feedForwardLength: 3072,
    headCount: 12,
    headCountKv: 12,
    rmsNormEpsilon: 1e-5,
    ropeFreqBase: 10000,
    matrixType: "Q8_0",
  },
  /** For embedding tests: BERT-style like all-MiniLM-L6-v2 but far smaller; about 130k parameters, under 300 kB. */
  "embed-tiny": {
    kind: "bert",
    name: "modelhost embed-tiny test model",
    contextLength: 512,
    embeddingLength: 64,
    blockCount: 2,
    feedForwardLength: 128,
    headCount: 4,
    layerNormEpsilon: 1e-12,
    tokenTypeCount: 2,
    poolingType: "mean",
    matrixType: "F16",
  },
};
