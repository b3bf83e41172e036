import type { LlamaModel, Token } from "node-llama-cpp";
import type { ImageInput } from "../core/images.js";
import { randomBase62 } from "../core/randomBase62.js";
import { ServerError } from "../core/ServerError.js";
import { imageTokens, type PromptImages } from "./BatchDecoder.js";
import { nativeModelOf, type NativeContext, type NativeHandle, type NativeMultimodal } from "./llamaInternals.js";

/**
 * The text an image stands as in a rendered prompt, where the projector splits it: random per
 * process, as llama-server's (server-common.cpp get_media_marker), so no text a client sends can
 * pass for one.
 */
const IMAGE_MARKER = `<__media_${randomBase62(16)}__>`;

/**
 * Projectors whose images mtmd decodes with non-causal attention (mtmd_decode_use_non_causal:
 * Gemma 3's, Gemma 4's and DeepSeek 4's; Gemma 4 V's only for some widths, taken as all here).
 */
const NON_CAUSAL_PROJECTORS = new Set(["gemma3", "gemma4v", "gemma4uv", "deepseek4v"]);

/** A prompt with images, split by the projector: its tokens (an image's as pseudo-tokens) and its images' evaluation. */
export interface ImagePrompt {
  tokens: Token[];
  images: PromptImages;
  /**
   * The prompt's tokens with `text` read as if it followed the prompt's own text: everything up to
   * its last image as it is, then its last text and `text` tokenized together, as mtmd tokenizes
   * the text after an image.
   */
  continued(text: string): Token[];
}

/**
 * A vision model's projector (its mmproj GGUF), loaded for the model by llama.cpp's mtmd in the
 * native build. A prompt's text is rendered with IMAGE_MARKER where each image is; mtmd tokenizes
 * the text between them (BOS as the vocabulary says, special tokens parsed, each piece apart, as
 * llama-server does) and turns each image into a chunk of embeddings, which the batch decoder
 * evaluates into the sequence in a step of its own.
 */
export class VisionProjector {
  readonly marker = IMAGE_MARKER;
  readonly #native: NativeMultimodal;
  readonly #handle: NativeHandle;
  readonly #model: LlamaModel;
  readonly #batchSize: number;
  /** Its images are decoded with non-causal attention, so each must fit one batch. */
  readonly #nonCausal: boolean;
  #freed = false;

  private constructor(native: NativeMultimodal, handle: NativeHandle, model: LlamaModel, batchSize: number, nonCausal: boolean) {
    this.#native = native;
    this.#handle = handle;
    this.#model = model;
    this.#batchSize = batchSize;
    this.#nonCausal = nonCausal;
  }

  /** Loads `path` for `model` (on the decode thread: mtmd runs one warm-up encode). Rejects if llama.cpp refuses the pair. */
  static async load(
    native: NativeMultimodal,
    model: LlamaModel,
    path: string,
    options: { threads: number; batchSize: number; projectorType: string },
  ): Promise<VisionProjector> {
    const handle = await native.load(nativeModelOf(model), path, options.threads, IMAGE_MARKER);
    return new VisionProjector(native, handle, model, options.batchSize, NON_CAUSAL_PROJECTORS.has(options.projectorType));
  }

  /**
   * Splits `text` (rendered with `marker` for each image, in order) into text tokens and image
   * chunks; `evaluate` is what the batch decoder runs for each image, into `context`'s sequences.
   * An image stb_image cannot decode is a 400 naming `params[i]`.
   */
  async tokenize(text: string, images: readonly ImageInput[], params: readonly string[], context: NativeContext): Promise<ImagePrompt> {
    let split: Awaited<ReturnType<NativeMultimodal["tokenize"]>>;
    try {
      split = await this.#native.tokenize(
        this.#handle,
        text,
        images.map((image) => image.bytes),
      );
    } catch (error) {
      const undecodable = /^image (\d+) could not be decoded/.exec((error as Error).message);
      const param = undecodable ? params[Number(undecodable[1])] : params[0];
      throw new ServerError("invalid_request", {
        ...(param === undefined ? {} : { param }),
        message: `Invalid value for '${param ?? "messages"}': the image is not accepted: ${undecodable ? "it could not be decoded" : (error as Error).message}.`,
        cause: error,
      });
    }
    const { chunks, parts } = split;
    const tokens: Token[] = [];
    // By first pseudo-token: the same image twice gives the same embeddings, whichever chunk is evaluated.
    const byToken = new Map<Token, NonNullable<ReturnType<PromptImages["at"]>>>();
    let lastImageEnd = 0;
    parts.forEach((part, index) => {
      if (part instanceof Int32Array) {
        for (const token of part) tokens.push(token as Token);
        return;
      }
      // A causal image is decoded a batch at a time; a non-causal one attends across all its
      // tokens, which llama.cpp computes only within one batch (mtmd-helper.cpp).
      if (this.#nonCausal && part.tokens > this.#batchSize) {
        throw new ServerError("invalid_request", {
          param: params[0] ?? "messages",
          message: `An image takes ${part.tokens} tokens for this model, which reads each image in one batch, and a batch holds ${this.#batchSize} (--batch-size): raise --batch-size to at least ${part.tokens}.`,
        });
      }
      // One pseudo-token per position, so that a sequence's position stays its index in the
      // decoder's token list. Placed by M-RoPE (Qwen2-VL's), an image of nx × ny merged patches
      // takes max(nx, ny) positions for its nx·ny tokens: mtmd decodes every one of its KV cells
      // at its first position (the temporal plane; x and y go in the other planes), and the text
      // after it goes on max(nx, ny) later (mtmd_image_tokens_get_n_pos, mtmd-helper.cpp). A cut
      // at the image's start (llama_memory_seq_rm from that position) removes all its cells, and
      // one after it none of them, as for an image of one position per token.
      const pseudo = imageTokens(part.id, part.positions);
      byToken.set(pseudo[0]!, {
        length: part.positions,
        tokens: part.tokens,
        evaluate: async (sequenceId, position) => {
          const next = await this.#native.evaluate(context, this.#handle, chunks, index, sequenceId, position, this.#batchSize);
          if (next !== position + part.positions) throw new Error(`The image took positions ${position}-${next}, not ${part.positions}.`);
        },
      });
      tokens.push(...pseudo);
      lastImageEnd = tokens.length;
    });
    const lastText = tokens.slice(lastImageEnd);
    const tail = text.slice(text.lastIndexOf(this.marker) + this.marker.length);
    const tailTokens = this.#model.tokenize(tail, true);
    // The last text part is the image's closing text (Gemma 3's `<end_of_image>`), then the tail.
    const head = endsWith(lastText, tailTokens) ? lastText.slice(0, lastText.length - tailTokens.length) : undefined;
    return {
      tokens,
      images: { at: (token) => byToken.get(token) },
      continued: (more) =>
        head === undefined
          ? [...tokens, ...this.#model.tokenize(more, true)]
          : [...tokens.slice(0, lastImageEnd), ...head, ...this.#model.tokenize(tail + more, true)],
    };
  }

  /** Frees the projector (before its model goes); later calls fail. */
  async free(): Promise<void> {
    if (this.#freed) return;
    this.#freed = true;
    await this.#native.free(this.#handle);
  }
}

function endsWith(tokens: readonly Token[], end: readonly Token[]): boolean {
  if (end.length > tokens.length) return false;
  const offset = tokens.length - end.length;
  return end.every((token, i) => tokens[offset + i] === token);
}
