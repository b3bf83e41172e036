import type { LlamaModel, LlamaRankingContext, Token } from "node-llama-cpp";
import type { RequestOptions } from "../core/Engine.js";
import type { RerankRequest, RerankResult } from "../core/RerankRequest.js";
import { ServerError } from "../core/ServerError.js";
import { SingleBatchRunner, type SingleBatchOptions } from "./SingleBatchRunner.js";

/**
 * A ranking context's sizes: a query and a document are read as one input in one decode call, so
 * `contextSize` bounds the two together, special tokens included.
 */
export type RankingOptions = SingleBatchOptions;

/**
 * A reranking model's scores: node-llama-cpp's ranking context, created on the first request and
 * used by one request at a time. Each document is evaluated together with the query as one input
 * (`[BOS] query [EOS] [SEP] document [EOS]`, node-llama-cpp's layout for models without a rerank
 * template), and the classification head's logit for it becomes a probability by the sigmoid.
 */
export class RankingRunner extends SingleBatchRunner<LlamaRankingContext> {
  readonly #model: LlamaModel;

  constructor(model: LlamaModel, options: RankingOptions) {
    super(options, (settings) => model.createRankingContext(settings));
    this.#model = model;
  }

  async rerank(request: RerankRequest, options: RequestOptions): Promise<Omit<RerankResult, "loadMs">> {
    // As the ranking context tokenizes strings: without special tokens, and without the leading
    // space some tokenizers put before a text.
    const tokenize = (text: string) => this.#model.tokenize(text, false, "trimLeadingSpace");
    const query = tokenize(request.query);
    const documents = request.documents.map(tokenize);
    const { outputs: scores, promptTokens } = await this.evaluateEach(
      options,
      (context) => documents.map((document, index) => ({ input: document, length: this.#checkedLength(context, query, document, index) })),
      (context, document) => context.rank(query, document),
    );
    return { scores, promptTokens };
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
