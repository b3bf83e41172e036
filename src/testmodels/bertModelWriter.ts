// Writes the embedding test model: a GGUF file in llama.cpp's `bert` architecture, laid out as
// convert_hf_to_gguf.py writes all-MiniLM or bge (BertModel), with the project's WordPiece
// vocabulary and seeded random weights.
import { GgufWriter, type GgufTensor } from "../gguf/GgufWriter.js";
import {
  addGeneralMetadata,
  addShapeMetadata,
  addSpecialTokenIds,
  addVocabulary,
  bool,
  constantTensor,
  f32,
  matrixMaker,
  u32,
  type BlockGains,
} from "./modelWriterParts.js";
import type { BertPreset, NomicBertPreset } from "./presets.js";
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

/** llama.cpp's llama_pooling_type values. */
const POOLING_TYPES: Record<BertPreset["poolingType"], number> = { mean: 1, cls: 2, rank: 4 };

/** The keys llama.cpp reads for the bert architecture. */
function addModelMetadata(writer: GgufWriter, preset: BertPreset, vocabularySize: number): void {
  addEncoderMetadata(writer, "bert", preset).set("bert.vocab_size", u32(vocabularySize));
}

/** The keys llama.cpp reads for both encoder architectures, bert and nomic-bert, under each one's prefix. */
export function addEncoderMetadata(
  writer: GgufWriter,
  architecture: "bert" | "nomic-bert",
  preset: BertPreset | NomicBertPreset,
): GgufWriter {
  addGeneralMetadata(writer, architecture, preset);
  addShapeMetadata(writer, architecture, preset, [
    "context_length",
    "embedding_length",
    "feed_forward_length",
    "block_count",
    "attention.head_count",
  ]);
  return (
    writer
      .set(`${architecture}.attention.layer_norm_epsilon`, f32(preset.layerNormEpsilon))
      // Both default to a causal model without pooling, which would make this a decoder.
      .set(`${architecture}.attention.causal`, bool(false))
      .set(`${architecture}.pooling_type`, u32(POOLING_TYPES[preset.poolingType]))
  );
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
export function addTokenizerMetadata(
  writer: GgufWriter,
  preset: Pick<BertPreset, "tokenTypeCount">,
  vocabulary: WordPieceVocabulary,
): void {
  // The pre-tokenizer is read only for BPE vocabularies; "default" is what the converter writes
  // when it has no better name.
  addVocabulary(writer, { ...vocabulary, pre: "default" });
  // Without it llama.cpp refuses to load a bert model ("model needs to define token type count").
  writer.set("tokenizer.ggml.token_type_count", u32(preset.tokenTypeCount));
  addSpecialTokenIds(writer, {
    bos: vocabulary.clsId,
    eos: vocabulary.sepId,
    unknown: vocabulary.unkId,
    // Sic: llama.cpp's key is misspelt.
    seperator: vocabulary.sepId,
    padding: vocabulary.padId,
    cls: vocabulary.clsId,
    mask: vocabulary.maskId,
  });
  writer
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
 * Gains of the random weights (see matrixMaker; the embeddings' and biases' are their standard
 * deviations), in the spirit of the llama models' WEIGHT_GAINS. Token vectors are unit-scale and
 * position vectors much smaller, so the words, not the length, decide the embedding; queries and
 * keys are large enough for attention to prefer some tokens, so the context changes a token's
 * vector; block outputs are halved so two blocks mix the tokens without washing out their
 * identity. Biases are small but not zero, so every bias tensor takes part.
 */
export const WEIGHT_GAINS: BlockGains & {
  token: number;
  position: number;
  tokenType: number;
  bias: number;
  classifier: number;
  score: number;
} = {
  token: 1,
  position: 0.2,
  tokenType: 0.1,
  queryKey: 2,
  value: 1,
  feedForward: 1,
  residual: 0.5,
  bias: 0.1,
  // The classification head: the dense layer's outputs go through tanh, so a gain of 1 keeps them
  // away from its flat ends. The [CLS] vector is layer-normed but the tanh outputs are small, so
  // the score needs a large gain for documents to differ clearly: with 6, four sample documents
  // against one query scored 0.50, 0.63, 0.76 and 0.83 (3 gave 0.51 to 0.70).
  classifier: 1,
  score: 6,
};

/** A layer norm as initialized: scale one, shift zero. */
export function layerNormTensors(name: string, size: number): GgufTensor[] {
  return [constantTensor(`${name}.weight`, size, 1), constantTensor(`${name}.bias`, size, 0)];
}

/**
 * Tensor names and shapes as llama.cpp's bert architecture loads them (llama_model_bert::
 * load_arch_tensors; dims in ggml order: [in, out]). llama.cpp refuses a file with tensors it
 * does not load; the optional classifier head (cls, cls.output), which only rank pooling reads,
 * is written for rerankers alone, after the blocks (so embedding models keep their bytes).
 */
function addBertTensors(writer: GgufWriter, preset: BertPreset, vocabularySize: number, seed: number): void {
  const hidden = preset.embeddingLength;
  const ffn = preset.feedForwardLength;
  const matrix = matrixMaker(preset, seed);
  const bias = (name: string, size: number) => randomTensor(name, [size], "F32", WEIGHT_GAINS.bias, seed);
  const layerNorm = (name: string) => layerNormTensors(name, hidden);

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
  if (preset.poolingType === "rank") {
    // As convert_hf_to_gguf.py writes BertForSequenceClassification: the pooler's dense layer is
    // `cls`, the one-label classifier `cls.output` (llama.cpp reads one output without labels).
    writer
      .addTensor(matrix("cls.weight", hidden, hidden, WEIGHT_GAINS.classifier))
      .addTensor(bias("cls.bias", hidden))
      .addTensor(matrix("cls.output.weight", hidden, 1, WEIGHT_GAINS.score))
      .addTensor(bias("cls.output.bias", 1));
  }
}
