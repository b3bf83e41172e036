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
  /**
   * A thinking model: a Qwen3-style template with a `<think>…</think>` thought section (and its
   * `enable_thinking` switch), and weights that write a short fixed thought at the start of every
   * reply (thoughtWiring.ts).
   */
  readonly thoughts?: boolean;
  /** Fill-in-the-middle tokens (`<|fim_prefix|>`, `<|fim_suffix|>`, `<|fim_middle|>`) in the vocabulary, declared in the GGUF keys llama.cpp reads. */
  readonly fillInTheMiddle?: boolean;
}

/**
 * A BERT-style sentence-embedding model in llama.cpp's `bert` architecture, like all-MiniLM or
 * bge: learned position embeddings, bidirectional attention, post-layer-norm blocks with biases,
 * a GELU feed-forward network, and the token vectors pooled into one embedding. With rank pooling
 * it is a cross-encoder reranker instead, like bge-reranker or ms-marco-MiniLM: the [CLS] vector
 * goes through a classification head (dense + tanh, then one output) to one relevance logit.
 */
export interface BertPreset extends TransformerShape {
  readonly kind: "bert";
  readonly layerNormEpsilon: number;
  /** Rows of the token-type (segment) embedding; llama.cpp always uses row 0. */
  readonly tokenTypeCount: number;
  /**
   * How llama.cpp turns the token vectors into one output: their mean, or the [CLS] token's, as
   * the embedding; or (rank) the [CLS] token's through the classification head, as a relevance score.
   */
  readonly poolingType: "mean" | "cls" | "rank";
  /** Type of the embedding, attention and feed-forward matrices; norms and biases are always F32. */
  readonly matrixType: "F32" | "F16";
}

export type TestModelPreset = LlamaPreset | BertPreset;

export type TestModelPresetName = "tiny" | "bench" | "embed-tiny" | "think-tiny" | "rerank-tiny" | "fim-tiny" | "long-tiny" | "script-tiny";

const tiny: LlamaPreset = {
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
};

const embedTiny: BertPreset = {
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
};

export const presets: Readonly<Record<TestModelPresetName, TestModelPreset>> = {
  /** For tests: loads and decodes in milliseconds; about 160k parameters, well under 1 MB. */
  tiny,
  /** For thinking tests: tiny's shapes, with a thought section in its template that every reply opens. */
  "think-tiny": { ...tiny, name: "modelhost think-tiny test model", thoughts: true },
  /** For fill-in-the-middle tests (/v1/completions and /api/generate `suffix`): tiny's shapes and weights, with FIM tokens. */
  "fim-tiny": { ...tiny, name: "modelhost fim-tiny test model", fillInTheMiddle: true },
  /**
   * For tests that stop a stream by hand: tiny's shapes and weights with a 32,768-token context, so
   * an answer of up to 32,000 tokens runs for seconds even on a fast machine (tiny's 4,096 tokens
   * can end within a second).
   */
  "long-tiny": { ...tiny, name: "modelhost long-tiny test model", contextLength: 32_768 },
  /**
   * For scripted models (makeTestModel's `script`): tiny with a hidden size of 128 in two heads of
   * 64, room for a script of up to 51 distinct tokens (two reserved dimensions each, 24 left random)
   * and a previous-token head whose RoPE singles out distance 1 by 53.6 nats (scriptWiring.ts).
   * About 550k parameters, about 1.1 MB. Its context holds the longest families' prompts (Command
   * R7B's preamble with a tool is about 4,000 tokens in the project's byte-level vocabulary).
   */
  "script-tiny": {
    ...tiny,
    name: "modelhost script-tiny test model",
    contextLength: 16_384,
    embeddingLength: 128,
    feedForwardLength: 384,
    headCount: 2,
    headCountKv: 2,
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
  "embed-tiny": embedTiny,
  /** For rerank tests: embed-tiny's shape and vocabulary, with rank pooling and a classification head; under 300 kB. */
  "rerank-tiny": { ...embedTiny, name: "modelhost rerank-tiny test model", poolingType: "rank" },
};
