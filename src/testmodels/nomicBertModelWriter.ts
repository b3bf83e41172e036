// Writes embedding models in llama.cpp's `nomic-bert` architecture, laid out as the published
// nomic-embed-text-v1.5 GGUF is (convert_hf_to_gguf.py's NomicBertModel): a fused query-key-value
// matrix, SwiGLU feed-forward blocks, rotary positions and no biases in the blocks, with either the
// project's WordPiece vocabulary or a real one copied from a GGUF file (bert-base-uncased's).
import { GgufWriter, type GgufTensor } from "../gguf/GgufWriter.js";
// The bert models' gains suit these blocks too: unit-scale token vectors, queries and keys large
// enough for attention to prefer some tokens, halved block outputs.
import { addEncoderMetadata, addTokenizerMetadata, layerNormTensors, WEIGHT_GAINS } from "./bertModelWriter.js";
import type { CopiedVocabulary } from "./copiedVocabulary.js";
import { f32, matrixMaker } from "./modelWriterParts.js";
import type { NomicBertPreset } from "./presets.js";
import { randomTensor } from "./randomTensor.js";
import type { WordPieceVocabulary } from "./wordPieceVocabulary.js";

export function nomicBertModelWriter(
  preset: NomicBertPreset,
  vocabulary: { project: WordPieceVocabulary } | { copied: CopiedVocabulary },
  seed: number,
): GgufWriter {
  if (preset.embeddingLength % preset.headCount !== 0) {
    throw new RangeError(`The hidden size ${preset.embeddingLength} must be a multiple of the head count ${preset.headCount}`);
  }
  const writer = new GgufWriter();
  addEncoderMetadata(writer, "nomic-bert", preset).set("nomic-bert.rope.freq_base", f32(preset.ropeFreqBase));
  let vocabularySize: number;
  if ("project" in vocabulary) {
    addTokenizerMetadata(writer, preset, vocabulary.project);
    vocabularySize = vocabulary.project.tokens.length;
  } else {
    // A real BERT vocabulary file holds the keys llama.cpp needs, token_type_count among them; the
    // special ids it leaves out are bert-base-uncased's, llama.cpp's defaults for WordPiece.
    for (const [key, value] of vocabulary.copied.keys) writer.set(key, value);
    vocabularySize = vocabulary.copied.size;
  }
  addNomicBertTensors(writer, preset, vocabularySize, seed);
  return writer;
}

/**
 * Tensor names and shapes as llama.cpp's nomic-bert architecture loads them (llama_model_nomic_bert::
 * load_arch_tensors; dims in ggml order: [in, out]); the biases it would take are left out, as
 * nomic-embed-text-v1.5 has none.
 */
function addNomicBertTensors(writer: GgufWriter, preset: NomicBertPreset, vocabularySize: number, seed: number): void {
  const hidden = preset.embeddingLength;
  const ffn = preset.feedForwardLength;
  const matrix = matrixMaker(preset, seed);
  const layerNorm = (name: string) => layerNormTensors(name, hidden);

  writer
    .addTensor(randomTensor("token_embd.weight", [hidden, vocabularySize], preset.matrixType, WEIGHT_GAINS.token, seed))
    .addTensor(randomTensor("token_types.weight", [hidden, preset.tokenTypeCount], "F32", WEIGHT_GAINS.tokenType, seed));
  for (const tensor of layerNorm("token_embd_norm")) writer.addTensor(tensor);
  for (let block = 0; block < preset.blockCount; block++) {
    const prefix = `blk.${block}`;
    const tensors = [
      fusedQueryKeyValue(`${prefix}.attn_qkv.weight`, [
        matrix(`${prefix}.attn_q.weight`, hidden, hidden, WEIGHT_GAINS.queryKey),
        matrix(`${prefix}.attn_k.weight`, hidden, hidden, WEIGHT_GAINS.queryKey),
        matrix(`${prefix}.attn_v.weight`, hidden, hidden, WEIGHT_GAINS.value),
      ]),
      matrix(`${prefix}.attn_output.weight`, hidden, hidden, WEIGHT_GAINS.residual),
      ...layerNorm(`${prefix}.attn_output_norm`),
      matrix(`${prefix}.ffn_up.weight`, hidden, ffn, WEIGHT_GAINS.feedForward),
      matrix(`${prefix}.ffn_gate.weight`, hidden, ffn, WEIGHT_GAINS.feedForward),
      matrix(`${prefix}.ffn_down.weight`, ffn, hidden, WEIGHT_GAINS.residual),
      ...layerNorm(`${prefix}.layer_output_norm`),
    ];
    for (const tensor of tensors) writer.addTensor(tensor);
  }
}

/** The query, key and value matrices stacked into one (their output rows one after another), as nomic's Wqkv is. */
function fusedQueryKeyValue(name: string, parts: readonly [GgufTensor, GgufTensor, GgufTensor]): GgufTensor {
  const [inputs = 0] = parts[0].dims;
  const outputs = parts.reduce((sum, part) => sum + (part.dims[1] ?? 0), 0);
  return {
    name,
    dims: [inputs, outputs],
    type: parts[0].type,
    values: () => {
      const values = new Float32Array(inputs * outputs);
      let offset = 0;
      for (const part of parts) {
        const partValues = part.values();
        values.set(partValues, offset);
        offset += partValues.length;
      }
      return values;
    },
  };
}
