// Writes the embedding test model: a GGUF file in llama.cpp's `bert` architecture, laid out as
// convert_hf_to_gguf.py writes all-MiniLM or bge (BertModel), with the project's WordPiece
// vocabulary and seeded random weights.
import { GgufWriter } from "../gguf/GgufWriter.js";
import type { GgufTensor } from "../gguf/GgufWriter.js";
import type { BertPreset } from "./presets.js";
import { randomTensor } from "./randomTensor.js";
import type { WordPieceVocabulary } from "./wordPieceVocabulary.js";

export function bertModelWriter(preset: BertPreset, vocabulary: WordPieceVocabulary, seed: number): GgufWriter {
  if (preset.embeddingLength % preset.headCount !== 0) {
    throw new RangeError(`The hidden size ${preset.embeddingLength} must be a multiple of the head count ${preset.headCount}`);
  }
  const writer = new GgufWriter();
  addModelMetadata(writer, preset, vocabulary.tokens.length);
  addTokenizerMetadata(writer, preset, vocabulary);
  addBertTensors(writer, preset, vocabulary.tokens.length, seed);
  return writer;
}

/** llama.cpp's llama_ftype for a file whose matrices are of the given type. */
const FILE_TYPES: Record<BertPreset["matrixType"], number> = { F32: 0, F16: 1 };

/** llama.cpp's llama_pooling_type values. */
const POOLING_TYPES: Record<BertPreset["poolingType"], number> = { mean: 1, cls: 2 };

/** The keys llama.cpp reads for the bert architecture; it insists on these exact value types. */
function addModelMetadata(writer: GgufWriter, preset: BertPreset, vocabularySize: number): void {
  const u32 = (value: number) => ({ type: "uint32", value }) as const;
  writer
    .set("general.architecture", { type: "string", value: "bert" })
    .set("general.name", { type: "string", value: preset.name })
    .set("general.file_type", u32(FILE_TYPES[preset.matrixType]))
    .set("general.quantization_version", u32(2))
    .set("bert.context_length", u32(preset.contextLength))
    .set("bert.embedding_length", u32(preset.embeddingLength))
    .set("bert.feed_forward_length", u32(preset.feedForwardLength))
    .set("bert.block_count", u32(preset.blockCount))
    .set("bert.attention.head_count", u32(preset.headCount))
    .set("bert.attention.layer_norm_epsilon", { type: "float32", value: preset.layerNormEpsilon })
    // Both default to a causal model without pooling, which would make this a decoder.
    .set("bert.attention.causal", { type: "bool", value: false })
    .set("bert.pooling_type", u32(POOLING_TYPES[preset.poolingType]))
    .set("bert.vocab_size", u32(vocabularySize));
}

/**
 * The tokenizer keys convert_hf_to_gguf.py writes for an uncased BERT tokenizer. llama.cpp's
 * defaults for "bert" are bert-base-uncased's ids ([CLS] 101, [SEP] 102, [UNK] 100, [MASK] 103,
 * [PAD] 0), so every id is set. Its WordPiece tokenizer adds the BOS id in front and the
 * separator id at the end whenever special tokens are added, whatever add_bos/add_eos say (and
 * node-llama-cpp's embedding context does the same with `tokens.bos` and `tokens.sep`), so BOS
 * must be [CLS]. The add_* flags are written as the converter derives them from BERT's
 * "[CLS] $A [SEP]" / "[CLS] $A [SEP] $B [SEP]" templates, for other readers of the file. EOS is
 * [SEP] as in converted models; llama.cpp warns that it is not an end-of-generation token, and
 * it finds "[PAD]" by its text (Kimi-K2 spells its FIM pad so) and makes it one.
 */
function addTokenizerMetadata(writer: GgufWriter, preset: BertPreset, vocabulary: WordPieceVocabulary): void {
  const u32 = (value: number) => ({ type: "uint32", value }) as const;
  const bool = (value: boolean) => ({ type: "bool", value }) as const;
  writer
    .set("tokenizer.ggml.model", { type: "string", value: vocabulary.model })
    // Read only for BPE vocabularies; "default" is what the converter writes when it has no better name.
    .set("tokenizer.ggml.pre", { type: "string", value: "default" })
    .set("tokenizer.ggml.tokens", { type: "array", itemType: "string", values: vocabulary.tokens })
    .set("tokenizer.ggml.token_type", { type: "array", itemType: "int32", values: vocabulary.tokenTypes })
    // Without it llama.cpp refuses to load a bert model ("model needs to define token type count").
    .set("tokenizer.ggml.token_type_count", u32(preset.tokenTypeCount))
    .set("tokenizer.ggml.bos_token_id", u32(vocabulary.clsId))
    .set("tokenizer.ggml.eos_token_id", u32(vocabulary.sepId))
    .set("tokenizer.ggml.unknown_token_id", u32(vocabulary.unkId))
    // Sic: llama.cpp's key is misspelt.
    .set("tokenizer.ggml.seperator_token_id", u32(vocabulary.sepId))
    .set("tokenizer.ggml.padding_token_id", u32(vocabulary.padId))
    .set("tokenizer.ggml.cls_token_id", u32(vocabulary.clsId))
    .set("tokenizer.ggml.mask_token_id", u32(vocabulary.maskId))
    .set("tokenizer.ggml.add_bos_token", bool(true))
    .set("tokenizer.ggml.add_eos_token", bool(true))
    // Defaults to true for WordPiece; llama-server's reranking would then join a query and a
    // document with [SEP] [SEP] instead of BERT's single [SEP].
    .set("tokenizer.ggml.add_sep_token", bool(false))
    // Uncased: lower-case and strip accents (llama.cpp's defaults too, written out for clarity).
    .set("tokenizer.ggml.normalizer.lowercase", bool(true))
    .set("tokenizer.ggml.normalizer.strip_accents", bool(true));
}

/**
 * Standard deviations of the random weights, in the spirit of the llama models' WEIGHT_GAINS: a
 * matrix applied to a layer-normalized hidden state gets gain / sqrt(inputs), so its outputs
 * have about the gain as standard deviation. Token vectors are unit-scale and position vectors
 * much smaller, so the words, not the length, decide the embedding; queries and keys are large
 * enough for attention to prefer some tokens, so the context changes a token's vector; block
 * outputs are halved so two blocks mix the tokens without washing out their identity. Biases are
 * small but not zero, so every bias tensor takes part.
 */
const WEIGHT_GAINS = {
  token: 1,
  position: 0.2,
  tokenType: 0.1,
  queryKey: 2,
  value: 1,
  feedForward: 1,
  /** Attention output and feed-forward down projections, which add to the residual stream. */
  residual: 0.5,
  bias: 0.1,
};

/**
 * Tensor names and shapes as llama.cpp's bert architecture loads them (llama_model_bert::
 * load_arch_tensors; dims in ggml order: [in, out]). llama.cpp refuses a file with tensors it
 * does not load, so the optional classifier head (cls, cls.output) is left out.
 */
function addBertTensors(writer: GgufWriter, preset: BertPreset, vocabularySize: number, seed: number): void {
  const hidden = preset.embeddingLength;
  const ffn = preset.feedForwardLength;
  const matrix = (name: string, inputs: number, outputs: number, gain: number) =>
    randomTensor(name, [inputs, outputs], preset.matrixType, gain / Math.sqrt(inputs), seed);
  const bias = (name: string, size: number) => randomTensor(name, [size], "F32", WEIGHT_GAINS.bias, seed);
  const constant = (name: string, value: number): GgufTensor => ({
    name,
    dims: [hidden],
    type: "F32",
    values: () => new Float32Array(hidden).fill(value),
  });
  // Layer norms as initialized: scale one, shift zero.
  const layerNorm = (name: string) => [constant(`${name}.weight`, 1), constant(`${name}.bias`, 0)];

  writer
    .addTensor(randomTensor("token_embd.weight", [hidden, vocabularySize], preset.matrixType, WEIGHT_GAINS.token, seed))
    .addTensor(randomTensor("token_types.weight", [hidden, preset.tokenTypeCount], "F32", WEIGHT_GAINS.tokenType, seed))
    .addTensor(randomTensor("position_embd.weight", [hidden, preset.contextLength], preset.matrixType, WEIGHT_GAINS.position, seed));
  for (const tensor of layerNorm("token_embd_norm")) writer.addTensor(tensor);
  for (let block = 0; block < preset.blockCount; block++) {
    const prefix = `blk.${block}`;
    const tensors = [
      matrix(`${prefix}.attn_q.weight`, hidden, hidden, WEIGHT_GAINS.queryKey),
      bias(`${prefix}.attn_q.bias`, hidden),
      matrix(`${prefix}.attn_k.weight`, hidden, hidden, WEIGHT_GAINS.queryKey),
      bias(`${prefix}.attn_k.bias`, hidden),
      matrix(`${prefix}.attn_v.weight`, hidden, hidden, WEIGHT_GAINS.value),
      bias(`${prefix}.attn_v.bias`, hidden),
      matrix(`${prefix}.attn_output.weight`, hidden, hidden, WEIGHT_GAINS.residual),
      bias(`${prefix}.attn_output.bias`, hidden),
      ...layerNorm(`${prefix}.attn_output_norm`),
      matrix(`${prefix}.ffn_up.weight`, hidden, ffn, WEIGHT_GAINS.feedForward),
      bias(`${prefix}.ffn_up.bias`, ffn),
      matrix(`${prefix}.ffn_down.weight`, ffn, hidden, WEIGHT_GAINS.residual),
      bias(`${prefix}.ffn_down.bias`, hidden),
      ...layerNorm(`${prefix}.layer_output_norm`),
    ];
    for (const tensor of tensors) writer.addTensor(tensor);
  }
}
