import type { LlamaEmbeddingContext, LlamaModel, Token } from "node-llama-cpp";
import type { EmbedInput, EmbedRequest, EmbedResult } from "../core/EmbedRequest.js";
import type { AdmissionTicket, RequestOptions } from "../core/Engine.js";
import { ServerError } from "../core/ServerError.js";
import { checkTokenIds } from "./checkTokenIds.js";
import { LazyContextPool } from "./LazyContextPool.js";

export interface EmbeddingOptions {
  /** Tokens per input, special tokens included: at most one batch, and the model's trained length. */
  contextSize: number;
  threads: number;
  maxQueue: number;
}

/**
 * A model's embeddings: an embedding context created on the first request, which requests use one
 * at a time (node-llama-cpp reads pooled embeddings of one sequence per context), the others
 * waiting in line within the model's queue limit.
 */
export class EmbeddingRunner {
  readonly #model: LlamaModel;
  readonly contextSize: number;
  /** The one context, lent to one request at a time: the model counts it in its activity. */
  readonly contexts: LazyContextPool<LlamaEmbeddingContext>;

  constructor(model: LlamaModel, options: EmbeddingOptions) {
    this.#model = model;
    this.contextSize = options.contextSize;
    // Pooling reads the outputs of one decode call, so an input must fit in one batch.
    this.contexts = new LazyContextPool(
      () => model.createEmbeddingContext({ contextSize: options.contextSize, batchSize: options.contextSize, threads: options.threads }),
      options.maxQueue,
    );
  }

  /** Embeds each input in turn on the model's embedding context; vectors come back L2-normalised. */
  async embed(request: EmbedRequest, { signal, admit }: RequestOptions): Promise<Omit<EmbedResult, "loadMs">> {
    const size = this.#model.embeddingVectorSize;
    if (request.dimensions !== undefined && request.dimensions > size) {
      throw new ServerError("invalid_request", {
        param: "dimensions",
        message: `Invalid value for 'dimensions': ${request.dimensions} is more than this model's ${size} dimensions.`,
      });
    }
    const inputs = request.inputs.map((input, index) => this.#embeddingTokens(input, index));
    const pool = await this.contexts.pool();
    const context = await pool.acquire(signal);
    let ticket: AdmissionTicket | undefined;
    let promptTokens = 0;
    try {
      const prepared = inputs.map((tokens, index) => {
        const length = context.calculateInputLength(tokens);
        if (length < this.contextSize) return { tokens, length };
        return { tokens: this.#cutToContext(tokens, length, index, request.truncate), length: this.contextSize - 1 };
      });
      ticket = await admit?.({ promptTokens: prepared.reduce((sum, input) => sum + input.length, 0), maxOutputTokens: 0 });
      const vectors: Float32Array[] = [];
      for (const { tokens, length } of prepared) {
        signal.throwIfAborted();
        const { vector } = await context.getEmbeddingFor(tokens);
        promptTokens += length;
        const dimensions = request.dimensions ?? size;
        vectors.push(request.normalize === false ? Float32Array.from(vector.slice(0, dimensions)) : unitVector(vector, dimensions));
      }
      return { vectors, promptTokens };
    } finally {
      pool.release(context);
      ticket?.settle({ promptTokens, completionTokens: 0 });
    }
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
