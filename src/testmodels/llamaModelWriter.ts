// Writes the chat test models: GGUF files in llama.cpp's `llama` architecture (or `qwen2`, the same
// blocks with query, key and value biases, or `qwen2vl`, qwen2's with M-RoPE) with the project's byte-level BPE vocabulary, a ChatML
// chat template with tool calling, and seeded random weights.
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
  text,
  u32,
  type BlockGains,
} from "./modelWriterParts.js";
import type { LlamaPreset } from "./presets.js";
import { randomTensor } from "./randomTensor.js";
import { TEST_MODEL_CHAT_TEMPLATE, TEST_MODEL_THINKING_CHAT_TEMPLATE } from "./testChatTemplate.js";
import { withFimTokens } from "./fimTokens.js";
import { scriptWiring, withScriptTokens, type TestModelScript } from "./scriptWiring.js";
import { thoughtWiring, withThoughtTokens } from "./thoughtWiring.js";
import { TokenType } from "./testVocabulary.js";
import type { TestVocabulary } from "./testVocabulary.js";
import { isChatTemplateKey, type CopiedVocabulary } from "./copiedVocabulary.js";

/**
 * `chatTemplate`: a template to write instead of the project's ChatML one (a real family's).
 * `script`: a reply the weights write at the start of every reply (scriptWiring.ts).
 */
export function llamaModelWriter(
  preset: LlamaPreset,
  baseVocabulary: TestVocabulary,
  seed: number,
  chatTemplate?: string,
  script?: TestModelScript,
): GgufWriter {
  if (script && preset.thoughts) throw new Error(`${preset.name} writes a thought of its own; a script needs a preset without one.`);
  if ((script || preset.thoughts) && preset.tiedEmbeddings)
    throw new Error(`${preset.name} ties its output to its embedding; scripts and thoughts wire the two apart.`);
  const thinking = preset.thoughts ? withThoughtTokens(baseVocabulary) : baseVocabulary;
  const fim = preset.fillInTheMiddle ? withFimTokens(thinking) : undefined;
  const vocabulary = script ? withScriptTokens(fim?.vocabulary ?? thinking, script) : (fim?.vocabulary ?? thinking);
  const writer = new GgufWriter();
  addModelMetadata(writer, preset, vocabulary.tokens.length);
  addTokenizerMetadata(
    writer,
    vocabulary,
    chatTemplate ?? (preset.thoughts ? TEST_MODEL_THINKING_CHAT_TEMPLATE : TEST_MODEL_CHAT_TEMPLATE),
  );
  if (fim) addSpecialTokenIds(writer, fim.ids);
  // A scripted model's wiring also makes block 0's head 0 a previous-token head (scriptWiring.ts).
  const wiring = preset.thoughts
    ? thoughtWiring(vocabulary, preset.embeddingLength)
    : script
      ? scriptWiring(vocabulary, preset, script)
      : undefined;
  addLlamaTensors(writer, preset, vocabulary.tokenTypes, seed, wiring);
  return writer;
}

/**
 * A llama model whose vocabulary is a real family's (copiedVocabulary.ts): its `tokenizer.*` keys
 * copied as they are, including its chat templates unless `chatTemplate` is given (then that one
 * alone), its file's name (which llama.cpp reads some token attributes by), and random weights with one embedding and output row per token. The thinking and
 * fill-in-the-middle presets add tokens of their own to the project's vocabulary, so they take none.
 */
export function llamaModelWriterWithVocabulary(
  preset: LlamaPreset,
  vocabulary: CopiedVocabulary,
  seed: number,
  chatTemplate?: string,
): GgufWriter {
  if (preset.thoughts || preset.fillInTheMiddle)
    throw new Error(`The preset "${preset.name}" adds tokens of its own: it takes no copied vocabulary.`);
  const writer = new GgufWriter();
  addModelMetadata(writer, { ...preset, name: vocabulary.name ?? preset.name }, vocabulary.size);
  for (const [key, value] of vocabulary.keys) {
    if (chatTemplate === undefined || !isChatTemplateKey(key)) writer.set(key, value);
  }
  if (chatTemplate !== undefined) writer.set("tokenizer.chat_template", text(chatTemplate));
  addLlamaTensors(writer, preset, vocabulary.tokenTypes, seed);
  return writer;
}

/** The keys llama.cpp reads for the llama and qwen2 architectures (the same keys under each one's prefix). */
function addModelMetadata(writer: GgufWriter, preset: LlamaPreset, vocabularySize: number): void {
  const architecture = preset.kind;
  addGeneralMetadata(writer, architecture, preset);
  addShapeMetadata(writer, architecture, preset, [
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
  ]);
  writer
    .set(`${architecture}.attention.head_count_kv`, u32(preset.headCountKv))
    // llama.cpp rejects a llama model whose rotary dimension differs from the head size.
    .set(`${architecture}.rope.dimension_count`, u32(preset.embeddingLength / preset.headCount))
    .set(`${architecture}.attention.layer_norm_rms_epsilon`, f32(preset.rmsNormEpsilon))
    .set(`${architecture}.rope.freq_base`, f32(preset.ropeFreqBase))
    .set(`${architecture}.vocab_size`, u32(vocabularySize));
  if (architecture === "qwen2vl") {
    // M-RoPE: the rotary pairs of a head split among the temporal, height and width planes (and a
    // fourth, unused), as Qwen2-VL's [16, 24, 24, 0] split its 64 pairs; tiny's heads of 16 have 8.
    const pairs = preset.embeddingLength / preset.headCount / 2;
    const height = Math.floor((pairs * 3) / 8);
    writer.set(`${architecture}.rope.dimension_sections`, {
      type: "array",
      itemType: "int32",
      values: [pairs - 2 * height, height, height, 0],
    });
  }
}

function addTokenizerMetadata(writer: GgufWriter, vocabulary: TestVocabulary, chatTemplate: string): void {
  addVocabulary(writer, vocabulary);
  writer.set("tokenizer.ggml.merges", { type: "array", itemType: "string", values: vocabulary.merges });
  addSpecialTokenIds(writer, {
    bos: vocabulary.bosId,
    eos: vocabulary.eosId,
    // Without it llama.cpp picks <|im_end|> or <|endoftext|> as end-of-turn by hash-map order.
    eot: vocabulary.eotId,
    padding: vocabulary.padId,
  });
  writer.set("tokenizer.ggml.add_bos_token", bool(false)).set("tokenizer.chat_template", text(chatTemplate));
}

/**
 * Gains of the random weights (see matrixMaker; the embedding's is its standard deviation). With
 * std 0.02 everywhere, as when training starts, greedy decoding of the 12-layer bench model locks
 * into one repeated token or a loop of a few. With these gains, 200 greedy tokens from various
 * prompts, seeds and both presets stay varied (over 120 distinct tokens): a unit-scale embedding
 * keeps each token's identity strong in the residual stream, halved block outputs keep 12 layers
 * from drowning it, and larger queries and keys give sharper attention, so the context matters.
 * The output gain makes sampled distributions peaky, like a trained model's, rather than nearly
 * uniform (it does not change which token is greedy).
 */
const WEIGHT_GAINS: BlockGains & { embedding: number; output: number; bias: number } = {
  embedding: 1,
  queryKey: 3,
  value: 1,
  feedForward: 1,
  residual: 0.5,
  output: 8,
  // qwen2's query, key and value biases (standard deviation): small against the projections'
  // unit-scale outputs, as the bert models' biases, so they take part without ruling attention.
  bias: 0.1,
};

/**
 * Tensor names and shapes as llama.cpp's llama and qwen2 architectures load them (dims in ggml
 * order: [in, out]): one embedding and output row per token type given. With tied embeddings there
 * is no output matrix: llama.cpp multiplies by the embedding instead.
 */
function addLlamaTensors(
  writer: GgufWriter,
  preset: LlamaPreset,
  tokenTypes: readonly number[],
  seed: number,
  wiring?: ReturnType<typeof thoughtWiring> | ReturnType<typeof scriptWiring>,
): void {
  const hidden = preset.embeddingLength;
  const kvWidth = (hidden / preset.headCount) * preset.headCountKv;
  const ffn = preset.feedForwardLength;
  const vocabularySize = tokenTypes.length;
  const matrix = matrixMaker(preset, seed);
  // RMS norm weights of one leave the normalized hidden state as it is.
  const norm = (name: string) => constantTensor(name, hidden, 1);
  const residualWriter = (tensor: GgufTensor, inputs: number) => wiring?.residualWriter(tensor, inputs) ?? tensor;

  const embedding = randomTensor("token_embd.weight", [hidden, vocabularySize], preset.matrixType, WEIGHT_GAINS.embedding, seed);
  writer.addTensor(preset.tiedEmbeddings ? silenced(embedding, hidden, tokenTypes) : (wiring?.embedding(embedding) ?? embedding));
  if (preset.llama3RopeScaling) writer.addTensor(ropeFrequencyFactors(preset, preset.llama3RopeScaling));
  // qwen2's biases follow their matrices, as convert_hf_to_gguf.py writes them.
  const withBias = (weight: GgufTensor, size: number): GgufTensor[] =>
    preset.kind !== "llama"
      ? [weight, randomTensor(weight.name.replace(/weight$/, "bias"), [size], "F32", WEIGHT_GAINS.bias, seed)]
      : [weight];
  for (let block = 0; block < preset.blockCount; block++) {
    const prefix = `blk.${block}`;
    // A scripted model's block 0 head 0 is its previous-token head (scriptWiring.ts).
    const head = block === 0 && wiring !== undefined && "query" in wiring ? wiring : undefined;
    const query = matrix(`${prefix}.attn_q.weight`, hidden, hidden, WEIGHT_GAINS.queryKey);
    const key = matrix(`${prefix}.attn_k.weight`, hidden, kvWidth, WEIGHT_GAINS.queryKey);
    const value = matrix(`${prefix}.attn_v.weight`, hidden, kvWidth, WEIGHT_GAINS.value);
    const attentionOutput = matrix(`${prefix}.attn_output.weight`, hidden, hidden, WEIGHT_GAINS.residual);
    const tensors = [
      norm(`${prefix}.attn_norm.weight`),
      ...withBias(head?.query(query) ?? query, hidden),
      ...withBias(head?.key(key) ?? key, kvWidth),
      ...withBias(head?.value(value) ?? value, kvWidth),
    ];
    for (const tensor of tensors) writer.addTensor(tensor);
    writer
      .addTensor(head?.attentionOutput(attentionOutput) ?? residualWriter(attentionOutput, hidden))
      .addTensor(norm(`${prefix}.ffn_norm.weight`))
      .addTensor(matrix(`${prefix}.ffn_gate.weight`, hidden, ffn, WEIGHT_GAINS.feedForward))
      .addTensor(matrix(`${prefix}.ffn_up.weight`, hidden, ffn, WEIGHT_GAINS.feedForward))
      .addTensor(residualWriter(matrix(`${prefix}.ffn_down.weight`, ffn, hidden, WEIGHT_GAINS.residual), ffn));
  }
  if (preset.tiedEmbeddings) {
    // Tied, the last token's own row would win every logit: the residual stream still carries its
    // embedding, and a row's dot product with itself (about hidden, 896 for Qwen2.5-0.5B, scaled
    // by 1/sqrt(13) after 24 blocks' outputs) beats the best of 150,000 random rows (about 4.5
    // sqrt(hidden)), so greedy decoding repeats one token forever. Final-norm gains of random sign
    // make that dot product a sum of terms of random sign too: the token is then no likelier than
    // any other, and replies vary as the untied models' do.
    writer.addTensor(randomTensor("output_norm.weight", [hidden], "F32", 1, seed));
    return;
  }
  writer.addTensor(norm("output_norm.weight"));
  const output = silenced(matrix("output.weight", hidden, vocabularySize, WEIGHT_GAINS.output), hidden, tokenTypes);
  writer.addTensor(wiring?.output(output) ?? output);
}

/**
 * The output matrix (or the tied embedding) with the rows of the control and tool-call tokens zeroed
 * (silenceAddedTokens). Tied, a zero row is also that token's input vector: the prompt's control
 * tokens then add nothing to the residual stream, which costs no speed and keeps replies running.
 */
function silenced(output: GgufTensor, hidden: number, tokenTypes: readonly number[]): GgufTensor {
  return { ...output, values: () => silenceAddedTokens(output.values(), hidden, tokenTypes) };
}

/**
 * Zeroes the output rows of the control and tool-call tokens. Their logits are then 0 while the
 * best of the others is far above (output gain 8; tied, the unit-scale embedding gives logits of
 * standard deviation sqrt(hidden), about 30 at 896, and the best of 150,000 is over 4 of those), so the model never ends a turn or starts a
 * tool call by itself: generation runs to the requested length, and tests that need a stop or a
 * tool call ask for one explicitly.
 */
function silenceAddedTokens(output: Float32Array, hidden: number, tokenTypes: readonly number[]): Float32Array {
  tokenTypes.forEach((type, id) => {
    if (type !== TokenType.normal) output.fill(0, id * hidden, (id + 1) * hidden);
  });
  return output;
}

/**
 * Llama 3's rope scaling as convert_hf_to_gguf.py (conversion/llama.py) computes it: one factor per
 * rotary frequency, 1 for wavelengths under originalContextLength / highFreqFactor, `factor` for
 * those over originalContextLength / lowFreqFactor, and a smooth blend between.
 */
function ropeFrequencyFactors(preset: LlamaPreset, scaling: NonNullable<LlamaPreset["llama3RopeScaling"]>): GgufTensor {
  const headSize = preset.embeddingLength / preset.headCount;
  const { factor, lowFreqFactor, highFreqFactor, originalContextLength } = scaling;
  const factors = Array.from({ length: headSize / 2 }, (_, i) => {
    const wavelength = (2 * Math.PI) / preset.ropeFreqBase ** (-(2 * i) / headSize);
    if (wavelength < originalContextLength / highFreqFactor) return 1;
    if (wavelength > originalContextLength / lowFreqFactor) return factor;
    const smooth = (originalContextLength / wavelength - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
    return 1 / ((1 - smooth) / factor + smooth);
  });
  return { name: "rope_freqs.weight", dims: [headSize / 2], type: "F32", values: () => Float32Array.from(factors) };
}
