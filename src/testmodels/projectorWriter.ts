// Vision projectors (`mmproj-*.gguf`) with random weights, in the layout llama.cpp's tools/mtmd
// loads (clip.cpp's clip_model_loader): a ViT image encoder and a projector into a text model's
// embedding space. Shapes are in ggml order, as GgufWriter takes them.
import { GgufWriter, type GgufTensor } from "../gguf/GgufWriter.js";
import { bool, constantTensor, f32, text, u32 } from "./modelWriterParts.js";
import { randomTensor } from "./randomTensor.js";

export interface ProjectorShape {
  /**
   * clip.projector_type: "mlp", LLaVA-1.5's two-layer MLP over the penultimate layer's patches; or
   * "gemma3", Gemma 3's SigLIP: every layer, then an average pool of `mergeFactor`² patches, an RMS
   * norm and one projection (mtmd wraps its tokens in <start_of_image> … <end_of_image> and decodes
   * them with non-causal attention); or "qwen2vl_merger", Qwen2-VL's: two patch convolutions
   * added (its temporal pair, for a still image), 2-D M-RoPE in every layer instead of position
   * embeddings, then 2 × 2 patches concatenated and an MLP (mtmd wraps its tokens in
   * <|vision_start|> … <|vision_end|> and places them by M-RoPE positions).
   */
  projectorType: "mlp" | "gemma3" | "qwen2vl_merger";
  /**
   * The square the image is resized to, and the patches it is cut into: (imageSize / patchSize)²
   * image tokens. qwen2vl_merger keeps an image's shape instead (rounded to 2 × patchSize pixels,
   * between 8 and 4,096 image tokens: clip.cpp's limits for Qwen2-VL).
   */
  imageSize: number;
  patchSize: number;
  /** The encoder's width, heads, feed-forward size (not equal to the width: clip.cpp would take its up and down matrices for swapped) and depth. */
  embeddingLength: number;
  headCount: number;
  feedForwardLength: number;
  blockCount: number;
  /** The text model's embedding size, which the projector's output must match. */
  textEmbeddingLength: number;
  /** gemma3 only: patches averaged into one image token, per side (clip.vision.projector.scale_factor). */
  mergeFactor?: number;
  /** The weight matrices' type: F32 (the default), or F16, as projector files are published. */
  weightType?: "F32" | "F16";
}

/**
 * Projectors for the tiny test model (text embeddings of 64): 16 image tokens from each, 32 × 32
 * pixels in patches of 8 (LLaVA's mlp), or in patches of 4 averaged 2 × 2 (Gemma 3's, whose tokens
 * mtmd wraps in <start_of_image> … <end_of_image> text and decodes with non-causal attention); and
 * Qwen2-VL's for qwen2vl-tiny, in patches of 4 merged 2 × 2 at the image's own shape (the tests'
 * 48 × 40 pictures: 6 × 5 = 30 image tokens at 6 M-RoPE positions).
 */
export const TINY_PROJECTORS = {
  mlp: {
    projectorType: "mlp",
    imageSize: 32,
    patchSize: 8,
    embeddingLength: 32,
    headCount: 2,
    feedForwardLength: 48,
    blockCount: 2,
    textEmbeddingLength: 64,
  },
  gemma3: {
    projectorType: "gemma3",
    imageSize: 32,
    patchSize: 4,
    mergeFactor: 2,
    embeddingLength: 32,
    headCount: 2,
    feedForwardLength: 48,
    blockCount: 2,
    textEmbeddingLength: 64,
  },
  qwen2vl: {
    projectorType: "qwen2vl_merger",
    imageSize: 32,
    patchSize: 4,
    embeddingLength: 32,
    headCount: 2,
    feedForwardLength: 48,
    blockCount: 2,
    textEmbeddingLength: 64,
  },
} as const satisfies Record<string, ProjectorShape>;

/**
 * LLaVA 1.5's projector with the shape of its vision tower, CLIP ViT-L/14 at 336 pixels (24 blocks
 * of width 1024, 16 heads, feed-forward 4096; 576 image tokens), in F16 as published: for the bench,
 * over a text model of `textEmbeddingLength`.
 */
export function clipVitL336(textEmbeddingLength: number): ProjectorShape {
  return {
    projectorType: "mlp",
    imageSize: 336,
    patchSize: 14,
    embeddingLength: 1024,
    headCount: 16,
    feedForwardLength: 4096,
    blockCount: 24,
    textEmbeddingLength,
    weightType: "F16",
  };
}

const STD = 0.5;

export function projectorWriter(shape: ProjectorShape, seed: number): GgufWriter {
  const { embeddingLength: e, feedForwardLength: f, patchSize: p, textEmbeddingLength: t } = shape;
  if (f === e) throw new Error("the feed-forward size must differ from the width (clip.cpp swaps up and down when they are equal)");
  const side = shape.imageSize / p;
  const patches = side ** 2;
  const merge = shape.mergeFactor ?? 4;
  if (shape.projectorType === "gemma3" && side % merge !== 0)
    throw new Error("the patches per side must be a multiple of the merge factor");
  const writer = new GgufWriter()
    .set("general.architecture", text("clip"))
    .set("general.name", text(`modelhost tiny ${shape.projectorType} projector`))
    .set("clip.has_vision_encoder", bool(true))
    .set("clip.projector_type", text(shape.projectorType))
    .set("clip.use_gelu", bool(true))
    .set("clip.vision.image_size", u32(shape.imageSize))
    .set("clip.vision.patch_size", u32(p))
    .set("clip.vision.embedding_length", u32(e))
    .set("clip.vision.feed_forward_length", u32(f))
    .set("clip.vision.projection_dim", u32(t))
    .set("clip.vision.attention.head_count", u32(shape.headCount))
    .set("clip.vision.attention.layer_norm_epsilon", f32(1e-6))
    .set("clip.vision.block_count", u32(shape.blockCount))
    .set("clip.vision.image_mean", { type: "array", itemType: "float32", values: [0.5, 0.5, 0.5] })
    .set("clip.vision.image_std", { type: "array", itemType: "float32", values: [0.5, 0.5, 0.5] });
  if (shape.projectorType === "gemma3") writer.set("clip.vision.projector.scale_factor", u32(merge));
  // Matrices in the weight type; the patch and position embeddings, which clip.cpp adds to, in F32.
  const random = (name: string, dims: number[], type = shape.weightType ?? "F32") =>
    randomTensor(name, dims, type, STD / Math.sqrt(dims[0]!), seed);
  const qwen2vl = shape.projectorType === "qwen2vl_merger";
  // Qwen2-VL's positions are M-RoPE's (no position embeddings) and its patch convolutions have no
  // bias (clip_graph_qwen2vl asserts none); its second convolution reads a video's second frame.
  const tensors: GgufTensor[] = qwen2vl
    ? [random("v.patch_embd.weight", [p, p, 3, e], "F32"), random("v.patch_embd.weight.1", [p, p, 3, e], "F32")]
    : [
        random("v.patch_embd.weight", [p, p, 3, e], "F32"),
        constantTensor("v.patch_embd.bias", e, 0),
        random("v.position_embd.weight", [e, patches], "F32"),
        ...(shape.projectorType === "mlp" ? [constantTensor("v.pre_ln.weight", e, 1), constantTensor("v.pre_ln.bias", e, 0)] : []),
      ];
  for (let block = 0; block < shape.blockCount; block++) {
    const name = (part: string) => `v.blk.${block}.${part}`;
    for (const part of ["attn_q", "attn_k", "attn_v", "attn_out"]) {
      tensors.push(random(name(`${part}.weight`), [e, e]), constantTensor(name(`${part}.bias`), e, 0));
    }
    for (const norm of ["ln1", "ln2"])
      tensors.push(constantTensor(name(`${norm}.weight`), e, 1), constantTensor(name(`${norm}.bias`), e, 0));
    tensors.push(
      random(name("ffn_up.weight"), [e, f]),
      constantTensor(name("ffn_up.bias"), f, 0),
      random(name("ffn_down.weight"), [f, e]),
      constantTensor(name("ffn_down.bias"), e, 0),
    );
  }
  if (shape.projectorType === "mlp") {
    // LLaVA's projector: mm.2(gelu(mm.0(x))); no mm.3 (that would make it MLP_NORM).
    tensors.push(
      random("mm.0.weight", [e, t]),
      constantTensor("mm.0.bias", t, 0),
      random("mm.2.weight", [t, t]),
      constantTensor("mm.2.bias", t, 0),
    );
  } else if (qwen2vl) {
    // The merger: a layer norm, then 2 × 2 neighbouring patches concatenated (4e) through
    // mm.2(gelu(mm.0(x))), 4e wide inside as Qwen2-VL's (5,120 for its 1,280).
    tensors.push(
      constantTensor("v.post_ln.weight", e, 1),
      constantTensor("v.post_ln.bias", e, 0),
      random("mm.0.weight", [4 * e, 4 * e]),
      constantTensor("mm.0.bias", 4 * e, 0),
      random("mm.2.weight", [4 * e, t]),
      constantTensor("mm.2.bias", t, 0),
    );
  } else {
    // The soft embedding norm's weight as Gemma's converter stores it (the value plus one): ones are no scaling.
    tensors.push(
      constantTensor("v.post_ln.weight", e, 1),
      constantTensor("v.post_ln.bias", e, 0),
      constantTensor("mm.soft_emb_norm.weight", e, 1),
      random("mm.input_projection.weight", [t, e]),
    );
  }
  for (const tensor of tensors) writer.addTensor(tensor);
  return writer;
}
