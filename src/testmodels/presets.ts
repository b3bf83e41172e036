// Shapes of the generated test models. Each preset is a record with a `kind` naming the llama.cpp
// architecture it is written in: `llama` and `qwen2` for the chat models, `bert` and `nomic-bert`
// for the embedding models.

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
  /**
   * A real model's shape for benchmarks: its family's vocabulary, chat template and quantization
   * (the weights stay random: speed depends on shapes and types, not values).
   */
  readonly realShape?: RealShape;
}

/**
 * What a preset with a real model's shape takes from llama.cpp's source tree as node-llama-cpp
 * ships it (test/support/llamaCppSource.ts), and how it is quantized: the writer writes the F16
 * file, then llama.cpp's own llama-quantize makes the quantization the published files have (our
 * writer encodes only F32, F16 and Q8_0; Q4_K_M is a mix of types llama-quantize chooses per tensor).
 */
export interface RealShape {
  /** The vocabulary file (a path in llama.cpp's tree, e.g. models/ggml-vocab-qwen2.gguf). */
  readonly vocabulary: string;
  /** The chat template file (a path in llama.cpp's tree), for chat models. */
  readonly chatTemplate?: string;
  /** llama-quantize's type, when the published file is not the F16 the writer writes. */
  readonly quantization?: "Q4_K_M" | "Q8_0";
}

/**
 * A decoder-only model in llama.cpp's `llama` architecture, or `qwen2`: the same blocks with
 * biases on the query, key and value projections (Qwen2, Qwen2.5); or `qwen2vl`: qwen2's blocks
 * with M-RoPE (Qwen2-VL, Qwen2.5-VL's text model), whose images mtmd places by 2-D positions.
 */
export interface LlamaPreset extends TransformerShape {
  readonly kind: "llama" | "qwen2" | "qwen2vl";
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
  /**
   * The output matrix is the token embedding (no `output.weight` in the file), as in Qwen2.5-0.5B
   * and Llama 3.2 1B.
   */
  readonly tiedEmbeddings?: boolean;
  /**
   * Llama 3.1's rope scaling (rope_type "llama3" in config.json), which convert_hf_to_gguf.py writes
   * as a `rope_freqs.weight` tensor of per-frequency factors that llama.cpp applies in its RoPE.
   */
  readonly llama3RopeScaling?: {
    readonly factor: number;
    readonly lowFreqFactor: number;
    readonly highFreqFactor: number;
    readonly originalContextLength: number;
  };
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

/**
 * A sentence-embedding model in llama.cpp's `nomic-bert` architecture, like nomic-embed-text-v1.5:
 * BERT's post-layer-norm blocks, but rotary positions instead of learned ones, a fused
 * query-key-value matrix, a SwiGLU feed-forward network and no biases in the blocks.
 */
export interface NomicBertPreset extends TransformerShape {
  readonly kind: "nomic-bert";
  readonly layerNormEpsilon: number;
  /** Rows of the token-type (segment) embedding; llama.cpp always uses row 0. */
  readonly tokenTypeCount: number;
  readonly poolingType: "mean" | "cls";
  readonly ropeFreqBase: number;
  /** Type of the embedding, attention and feed-forward matrices; norms are always F32. */
  readonly matrixType: "F32" | "F16";
}

export type TestModelPreset = LlamaPreset | BertPreset | NomicBertPreset;

export type TestModelPresetName =
  | "tiny"
  | "bench"
  | "embed-tiny"
  | "think-tiny"
  | "rerank-tiny"
  | "fim-tiny"
  | "long-tiny"
  | "script-tiny"
  | "script-1b"
  | "qwen2-tiny"
  | "qwen2vl-tiny"
  | "nomic-tiny"
  | "qwen2.5-0.5b-q4_k_m"
  | "qwen2.5-0.5b-q8_0"
  | "llama3.2-1b-q4_k_m"
  | "nomic-embed-f16";

/** Llama-3.2-1B's blocks, from its config.json: 16 layers, hidden 2,048 in 32 heads of 64 with 8 key/value heads, FFN 8,192. */
const llama32_1bBlocks = {
  kind: "llama",
  embeddingLength: 2048,
  blockCount: 16,
  feedForwardLength: 8192,
  headCount: 32,
  headCountKv: 8,
  rmsNormEpsilon: 1e-5,
} as const;

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

/**
 * Qwen2.5-0.5B-Instruct's shape, from its config.json: 24 layers, hidden 896 in 14 heads of 64 with
 * 2 key/value heads, FFN 4,864, rope base 1,000,000, context 32,768, tied embeddings; its real
 * vocabulary (llama.cpp's ggml-vocab-qwen2.gguf holds all 151,936 rows, padding included, as the
 * real embedding has them) and its chat template (Qwen2.5-7B-Instruct's, which every Qwen2.5
 * instruct model shares). About 494M parameters: 988 MB in F16 before llama-quantize.
 */
const qwen25_05b: LlamaPreset = {
  kind: "qwen2",
  name: "modelhost Qwen2.5-0.5B-Instruct shape",
  contextLength: 32_768,
  embeddingLength: 896,
  blockCount: 24,
  feedForwardLength: 4864,
  headCount: 14,
  headCountKv: 2,
  rmsNormEpsilon: 1e-6,
  ropeFreqBase: 1_000_000,
  matrixType: "F16",
  tiedEmbeddings: true,
};
const qwen25Files = { vocabulary: "models/ggml-vocab-qwen2.gguf", chatTemplate: "models/templates/Qwen-Qwen2.5-7B-Instruct.jinja" };

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
  /**
   * For the speculative decoding bench: a scripted model (makeTestModel's `script`) of
   * Llama-3.2-1B's blocks (16 layers, hidden 2,048 in 32 heads of 64 with 8 key/value heads, FFN
   * 8,192), in Q8_0 as a published quantization of it. It differs from the real shape in what the
   * script needs: the project's vocabulary (a few hundred tokens, where Llama 3 has 128,256, so its
   * output matrix is 0.5M weights, not 263M), an output matrix apart from the embedding, RoPE base
   * 10,000 without Llama 3's scaling (the script's previous-token head is tuned to it). About 0.97B
   * parameters, 1.0 GB.
   */
  "script-1b": {
    ...llama32_1bBlocks,
    name: "modelhost script-1b test model (Llama-3.2-1B blocks)",
    contextLength: 4096,
    ropeFreqBase: 10000,
    matrixType: "Q8_0",
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
  /** For the qwen2 writer's tests: tiny's shapes in the qwen2 architecture, with tied embeddings. */
  "qwen2-tiny": { ...tiny, kind: "qwen2", name: "modelhost qwen2-tiny test model", tiedEmbeddings: true },
  /**
   * For the M-RoPE vision tests: tiny's shapes in the qwen2vl architecture (Qwen2-VL's text model),
   * for the tiny qwen2vl_merger projector (projectorWriter.ts).
   */
  "qwen2vl-tiny": { ...tiny, kind: "qwen2vl", name: "modelhost qwen2vl-tiny test model" },
  /** For the nomic-bert writer's tests: embed-tiny's shapes in the nomic-bert architecture. */
  "nomic-tiny": { ...embedTiny, kind: "nomic-bert", name: "modelhost nomic-tiny test model", poolingType: "mean", ropeFreqBase: 1000 },
  /** For benchmarks: Qwen2.5-0.5B-Instruct's shape in Q4_K_M (the published file: about 398 MB). */
  "qwen2.5-0.5b-q4_k_m": { ...qwen25_05b, realShape: { ...qwen25Files, quantization: "Q4_K_M" } },
  /** For benchmarks: Qwen2.5-0.5B-Instruct's shape in Q8_0 (the published file: about 531 MB). */
  "qwen2.5-0.5b-q8_0": { ...qwen25_05b, realShape: { ...qwen25Files, quantization: "Q8_0" } },
  /**
   * For benchmarks: Llama-3.2-1B-Instruct's shape in Q4_K_M (the published file: about 808 MB), from
   * its config.json: 16 layers, hidden 2,048 in 32 heads of 64 with 8 key/value heads, FFN 8,192,
   * rope base 500,000 with Llama 3's scaling, context 131,072, tied embeddings; Llama 3's vocabulary of 128,256 tokens and
   * Llama 3.2's chat template (3B's, the same as 1B's). About 1.24B parameters: 2.5 GB in F16.
   */
  "llama3.2-1b-q4_k_m": {
    ...llama32_1bBlocks,
    name: "modelhost Llama-3.2-1B-Instruct shape",
    contextLength: 131_072,
    ropeFreqBase: 500_000,
    matrixType: "F16",
    tiedEmbeddings: true,
    llama3RopeScaling: { factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 8192 },
    realShape: {
      vocabulary: "models/ggml-vocab-llama-bpe.gguf",
      chatTemplate: "models/templates/meta-llama-Llama-3.2-3B-Instruct.jinja",
      quantization: "Q4_K_M",
    },
  },
  /**
   * For benchmarks: nomic-embed-text-v1.5's shape in F16 (the published file: about 274 MB): 12
   * layers, 768 dimensions in 12 heads, FFN 3,072, rope base 1,000, context 2,048, mean pooling, and
   * bert-base-uncased's WordPiece vocabulary of 30,522 (llama.cpp's ggml-vocab-bert-bge.gguf).
   */
  "nomic-embed-f16": {
    kind: "nomic-bert",
    name: "modelhost nomic-embed-text-v1.5 shape",
    contextLength: 2048,
    embeddingLength: 768,
    blockCount: 12,
    feedForwardLength: 3072,
    headCount: 12,
    layerNormEpsilon: 1e-12,
    tokenTypeCount: 2,
    poolingType: "mean",
    ropeFreqBase: 1000,
    matrixType: "F16",
    realShape: { vocabulary: "models/ggml-vocab-bert-bge.gguf" },
  },
};
