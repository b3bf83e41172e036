// Writes LoRA adapters for the llama test models: GGUF files as llama.cpp's convert_lora_to_gguf.py
// writes them (general.type "adapter", adapter.type "lora", adapter.lora.alpha, and a pair of
// low-rank matrices per adapted weight), with seeded random values.
import { GgufWriter, type GgufTensor } from "../gguf/GgufWriter.js";
import { f32, text } from "./modelWriterParts.js";
import type { LlamaPreset } from "./presets.js";
import { randomTensor } from "./randomTensor.js";

export interface LoraAdapterOptions {
  /** The rank r of each pair (A is [in, r], B is [r, out] in ggml order). Default 8. */
  rank?: number;
  /** LoRA's alpha: llama.cpp scales B·A by alpha / r (and by the scale a request gives). Default: the rank. */
  alpha?: number;
  /**
   * The standard deviation of A's and B's values. Trained adapters start B at zero and move it a
   * little; 0.3 (the default) makes B·A about as large as the tiny models' own weights, so an
   * adapter visibly changes what they write, and two adapters write differently.
   */
  std?: number;
  /** The weights adapted in each block (default: attention's four projections and the feed-forward's three). */
  targets?: readonly string[];
}

const DEFAULT_TARGETS = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"];

/** An adapter for models of `preset`'s shape (the same seed always gives the same bytes). */
export function loraAdapterWriter(preset: LlamaPreset, seed: number, options: LoraAdapterOptions = {}): GgufWriter {
  const rank = options.rank ?? 8;
  const std = options.std ?? 0.3;
  const writer = new GgufWriter()
    .set("general.architecture", text(preset.kind))
    .set("general.type", text("adapter"))
    .set("general.name", text(`${preset.name} LoRA ${seed}`))
    .set("adapter.type", text("lora"))
    .set("adapter.lora.alpha", f32(options.alpha ?? rank));
  const hidden = preset.embeddingLength;
  const kvWidth = (hidden / preset.headCount) * preset.headCountKv;
  const ffn = preset.feedForwardLength;
  // [in, out] of each weight, as llamaModelWriter shapes them.
  const shapes: Record<string, [number, number]> = {
    attn_q: [hidden, hidden],
    attn_k: [hidden, kvWidth],
    attn_v: [hidden, kvWidth],
    attn_output: [hidden, hidden],
    ffn_gate: [hidden, ffn],
    ffn_up: [hidden, ffn],
    ffn_down: [ffn, hidden],
  };
  for (let block = 0; block < preset.blockCount; block++) {
    for (const target of options.targets ?? DEFAULT_TARGETS) {
      const shape = shapes[target];
      if (shape === undefined) throw new Error(`A test adapter cannot adapt ${target}: it adapts ${Object.keys(shapes).join(", ")}.`);
      const [input, output] = shape;
      const name = `blk.${block}.${target}.weight`;
      const pair: GgufTensor[] = [
        randomTensor(`${name}.lora_a`, [input, rank], "F32", std, seed),
        randomTensor(`${name}.lora_b`, [rank, output], "F32", std, seed),
      ];
      for (const tensor of pair) writer.addTensor(tensor);
    }
  }
  return writer;
}
