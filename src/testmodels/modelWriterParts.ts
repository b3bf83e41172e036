// What the llama and bert model writers share: typed metadata values, the general, shape,
// vocabulary and special-token keys, and the random and constant tensors the models are built of.
import type { GgufTensor, GgufWriter } from "../gguf/GgufWriter.js";
import type { TestModelPreset } from "./presets.js";
import { randomTensor } from "./randomTensor.js";

// llama.cpp insists on exact value types for the keys it reads.
export const u32 = (value: number) => ({ type: "uint32", value }) as const;
export const f32 = (value: number) => ({ type: "float32", value }) as const;
export const bool = (value: boolean) => ({ type: "bool", value }) as const;
export const text = (value: string) => ({ type: "string", value }) as const;

type MatrixType = TestModelPreset["matrixType"];

/** llama.cpp's llama_ftype for a file whose matrices are of the given type. */
const FILE_TYPES: Record<MatrixType, number> = { F32: 0, F16: 1, Q8_0: 7 };

/** The `general.*` keys; the architecture is also the prefix of the model's own keys. */
export function addGeneralMetadata(writer: GgufWriter, architecture: TestModelPreset["kind"], preset: TestModelPreset): void {
  writer
    .set("general.architecture", text(architecture))
    .set("general.name", text(preset.name))
    .set("general.file_type", u32(FILE_TYPES[preset.matrixType]))
    .set("general.quantization_version", u32(2));
}

/** Where each size of a preset goes: `<architecture>.<key>`, a uint32. */
const SHAPE_KEYS = {
  context_length: "contextLength",
  embedding_length: "embeddingLength",
  block_count: "blockCount",
  feed_forward_length: "feedForwardLength",
  "attention.head_count": "headCount",
} as const satisfies Record<string, keyof TestModelPreset>;

/**
 * Writes the sizes every architecture has, in the order given: files keep their keys in the order
 * written, and the two writers have always written these in different orders (changing either
 * would change the bytes of the generated models).
 */
export function addShapeMetadata(
  writer: GgufWriter,
  architecture: TestModelPreset["kind"],
  preset: TestModelPreset,
  order: readonly (keyof typeof SHAPE_KEYS)[],
): void {
  for (const key of order) writer.set(`${architecture}.${key}`, u32(preset[SHAPE_KEYS[key]]));
}

/** The first tokenizer keys: the tokenizer and pre-tokenizer names, the tokens and their types. */
export function addVocabulary(
  writer: GgufWriter,
  vocabulary: { model: string; pre: string; tokens: readonly string[]; tokenTypes: readonly number[] },
): void {
  writer
    .set("tokenizer.ggml.model", text(vocabulary.model))
    .set("tokenizer.ggml.pre", text(vocabulary.pre))
    .set("tokenizer.ggml.tokens", { type: "array", itemType: "string", values: vocabulary.tokens })
    .set("tokenizer.ggml.token_type", { type: "array", itemType: "int32", values: vocabulary.tokenTypes });
}

/** Sets `tokenizer.ggml.<name>_token_id` for each entry, in order. */
export function addSpecialTokenIds(writer: GgufWriter, ids: Record<string, number>): void {
  for (const [name, id] of Object.entries(ids)) writer.set(`tokenizer.ggml.${name}_token_id`, u32(id));
}

/**
 * Makes the weight matrices of a preset: a matrix applied to a normalized hidden state gets
 * gain / sqrt(inputs) as standard deviation, so its outputs have about the gain as theirs. Dims
 * are in ggml order: [inputs, outputs].
 */
export function matrixMaker(preset: TestModelPreset, seed: number) {
  return (name: string, inputs: number, outputs: number, gain: number): GgufTensor =>
    randomTensor(name, [inputs, outputs], preset.matrixType, gain / Math.sqrt(inputs), seed);
}

/** A vector of `size` equal values: norm weights of one, norm biases of zero. */
export function constantTensor(name: string, size: number, value: number): GgufTensor {
  return { name, dims: [size], type: "F32", values: () => new Float32Array(size).fill(value) };
}

/** The tensor with its values edited in place as they are generated (weights wired by hand into random ones). */
export function editedTensor(tensor: GgufTensor, edit: (values: Float32Array) => void): GgufTensor {
  return {
    ...tensor,
    values: () => {
      const values = tensor.values();
      edit(values);
      return values;
    },
  };
}

/** Gains of a transformer block's matrices (see matrixMaker). */
export interface BlockGains {
  queryKey: number;
  value: number;
  feedForward: number;
  /** Attention output and feed-forward down projections, which add to the residual stream. */
  residual: number;
}
