import type { LlamaModel, LlamaRankingContext, Token } from "node-llama-cpp";
import type { AdmissionTicket, RequestOptions } from "../core/Engine.js";
import type { RerankRequest, RerankResult } from "../core/RerankRequest.js";
import { ServerError } from "../core/ServerError.js";
import type { EmbeddingOptions } from "./EmbeddingRunner.js";
import { LazyContextPool } from "./LazyContextPool.js";

/**
 * A reranking model's scores: node-llama-cpp's ranking context, created on the first request and
 * used by one request at a time. Each document is evaluated together with the query as one input
 * (`[BOS] query [EOS] [SEP] document [EOS]`, node-llama-cpp's layout for models without a rerank
 * template), and the classification head's logit for it becomes a probability by the sigmoid.
 */
export class RankingRunner {
  readonly #model: LlamaModel;
  /** Tokens per query-and-document input, special tokens included: one batch, as for embeddings. */
  readonly contextSize: number;
  /** The one context, lent to one request at a time: the model counts it in its activity. */
  readonly contexts: LazyContextPool<LlamaRankingContext>;

  constructor(model: LlamaModel, options: EmbeddingOptions) {
    this.#model = model;
    this.contextSize = options.contextSize;
    // Rank pooling reads the outputs of one decode call, like embeddings: one input, one batch.
    this.contexts = new LazyContextPool(
      () => model.createRankingContext({ contextSize: options.contextSize, batchSize: options.contextSize, threads: options.threads }),
      options.maxQueue,
    );
  }

  async rerank(request: RerankRequest, { signal, admit }: RequestOptions): Promise<Omit<RerankResult, "loadMs">> {
    // As the ranking context tokenizes strings: without special tokens, and without the leading
    // space some tokenizers put before a text.
    const tokenize = (text: string) => this.#model.tokenize(text, false, "trimLeadingSpace");
    const query = tokenize(request.query);
    const documents = request.documents.map(tokenize);
    const pool = await this.contexts.pool();
    const context = await pool.acquire(signal);
    let ticket: AdmissionTicket | undefined;
    let promptTokens = 0;
    try {
      const lengths = documents.map((document, index) => this.#checkedLength(context, query, document, index));
      ticket = await admit?.({ promptTokens: lengths.reduce((sum, length) => sum + length, 0), maxOutputTokens: 0 });
      const scores: number[] = [];
      for (const [index, document] of documents.entries()) {
        signal.throwIfAborted();
        scores.push(await context.rank(query, document));
        promptTokens += lengths[index] ?? 0;
      }
      return { scores, promptTokens };
    } finally {
      pool.release(context);
      ticket?.settle({ promptTokens, completionTokens: 0 });
    }
  }

  #checkedLength(context: LlamaRankingContext, query: Token[], document: Token[], index: number): number {
    const length = context.calculateInputLength(query, document);
    if (length < this.contextSize) return length;
    throw new ServerError("invalid_request", {
      param: `documents[${index}]`,
      message: `Invalid value for 'documents[${index}]': with the query it is ${length} tokens long, but this model reads at most ${this.contextSize - 1} at once. Shorten the query or the document.`,
    });
  }
}
