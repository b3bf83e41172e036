import type { LlamaEmbeddingContext, LlamaModel, Token } from "node-llama-cpp";
import type { EmbedInput, EmbedRequest, EmbedResult } from "../core/EmbedRequest.js";
import type { RequestOptions } from "../core/Engine.js";
import { ServerError } from "../core/ServerError.js";
import { checkTokenIds } from "./checkTokenIds.js";
import { SingleBatchRunner, type SingleBatchOptions } from "./SingleBatchRunner.js";

/** An embedding context's sizes: an input is evaluated in one decode call. */
export type EmbeddingOptions = SingleBatchOptions;

/** A model's embeddings, one input at a time on its embedding context. */
export class EmbeddingRunner extends SingleBatchRunner<LlamaEmbeddingContext> {
  readonly #model: LlamaModel;

  constructor(model: LlamaModel, options: EmbeddingOptions) {
    super(options, (settings) => model.createEmbeddingContext(settings));
    this.#model = model;
  }

  /** Embeds each input in turn on the model's embedding context; vectors come back L2-normalised. */
  async embed(request: EmbedRequest, options: RequestOptions): Promise<Omit<EmbedResult, "loadMs">> {
    const size = this.#model.embeddingVectorSize;
    if (request.dimensions !== undefined && request.dimensions > size) {
      throw new ServerError("invalid_request", {
        param: "dimensions",
        message: `Invalid value for 'dimensions': ${request.dimensions} is more than this model's ${size} dimensions.`,
      });
    }
    const dimensions = request.dimensions ?? size;
    const inputs = request.inputs.map((input, index) => this.#embeddingTokens(input, index));
    const { outputs: vectors, promptTokens } = await this.evaluateEach(
      options,
      (context) =>
        inputs.map((tokens, index) => {
          const length = context.calculateInputLength(tokens);
          if (length < this.contextSize) return { input: tokens, length };
          return { input: this.#cutToContext(tokens, length, index, request.truncate), length: this.contextSize - 1 };
        }),
      async (context, tokens) => {
        const { vector } = await context.getEmbeddingFor(tokens);
        return request.normalize === false ? Float32Array.from(vector.slice(0, dimensions)) : unitVector(vector, dimensions);
      },
    );
    return { vectors, promptTokens };
  }

  #embeddingTokens(input: EmbedInput, index: number): Token[] {
    if (typeof input === "string") return this.#model.tokenize(input);
    checkTokenIds(this.#model, input, `input[${index}]`);
    return input as Token[];
  }

  /** An input longer than the context is refused unless the caller asked to truncate it. */
  #cutToContext(tokens: Token[], length: number, index: number, truncate: boolean): Token[] {
    if (!truncate) {
      throw new ServerError("invalid_request", {
        param: `input[${index}]`,
        message: `Invalid value for 'input[${index}]': it is ${length} tokens long, but this model's context holds ${this.contextSize - 1}. Shorten it, or send "truncate": true to cut it.`,
      });
    }
    // The special tokens the model adds around an input count too.
    return tokens.slice(0, Math.max(0, tokens.length - (length - (this.contextSize - 1))));
  }
}

/** The first `dimensions` components, scaled to unit length, so cosine similarity is a dot product. */
function unitVector(vector: readonly number[], dimensions: number): Float32Array {
  const result = Float32Array.from(vector.slice(0, dimensions));
  let norm = 0;
  for (const value of result) norm += value * value;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let i = 0; i < result.length; i++) result[i]! /= norm;
  return result;
}
