// Vision projectors (`mmproj-*.gguf`) with random weights, in the layout llama.cpp's tools/mtmd
// loads (clip.cpp's clip_model_loader): a ViT image encoder and a projector into a text model's
// embedding space. Shapes are in ggml order, as GgufWriter takes them.
import { GgufWriter, type GgufTensor } from "../gguf/GgufWriter.js";
import { bool, constantTensor, f32, text, u32 } from "./modelWriterParts.js";
import { randomTensor } from "./randomTensor.js";

export interface ProjectorShape {
  /** clip.projector_type: LLaVA-1.5's two-layer MLP. */
  projectorType: "mlp";
  /** The square the image is resized to, and the patches it is cut into: (imageSize / patchSize)² image tokens. */
  imageSize: number;
  patchSize: number;
  /** The encoder's width, heads, feed-forward size (not equal to the width: clip.cpp would take its up and down matrices for swapped) and depth. */
  embeddingLength: number;
  headCount: number;
  feedForwardLength: number;
  blockCount: number;
  /** The text model's embedding size, which the projector's output must match. */
  textEmbeddingLength: number;
}

const STD = 0.5;

export function projectorWriter(shape: ProjectorShape, seed: number): GgufWriter {
  const { embeddingLength: e, feedForwardLength: f, patchSize: p, textEmbeddingLength: t } = shape;
  if (f === e) throw new Error("the feed-forward size must differ from the width (clip.cpp swaps up and down when they are equal)");
  const patches = (shape.imageSize / p) ** 2;
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
  const random = (name: string, dims: number[]) => randomTensor(name, dims, "F32", STD / Math.sqrt(dims[0]!), seed);
  const tensors: GgufTensor[] = [
    random("v.patch_embd.weight", [p, p, 3, e]),
    constantTensor("v.patch_embd.bias", e, 0),
    random("v.position_embd.weight", [e, patches]),
    constantTensor("v.pre_ln.weight", e, 1),
    constantTensor("v.pre_ln.bias", e, 0),
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
  // LLaVA's projector: mm.2(gelu(mm.0(x))); no mm.3 (that would make it MLP_NORM).
  tensors.push(
    random("mm.0.weight", [e, t]),
    constantTensor("mm.0.bias", t, 0),
    random("mm.2.weight", [t, t]),
    constantTensor("mm.2.bias", t, 0),
  );
  for (const tensor of tensors) writer.addTensor(tensor);
  return writer;
}
