// Shapes of the generated test models. Each preset is a record with a `kind`, so presets of
// other kinds (an embedding model is planned) can join the union without touching these.

/** A decoder-only model in llama.cpp's `llama` architecture. */
export interface LlamaPreset {
  readonly kind: "llama";
  /** `general.name` */
  readonly name: string;
  readonly contextLength: number;
  /** Hidden size. */
  readonly embeddingLength: number;
  readonly blockCount: number;
  readonly feedForwardLength: number;
  readonly headCount: number;
  /** Fewer key/value heads than query heads means grouped-query attention. */
  readonly headCountKv: number;
  readonly rmsNormEpsilon: number;
  readonly ropeFreqBase: number;
  /** Type of the embedding, attention, feed-forward and output matrices; norms are always F32. */
  readonly matrixType: "F32" | "F16" | "Q8_0";
}

export type TestModelPreset = LlamaPreset;

export type TestModelPresetName = "tiny" | "bench";

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
};
