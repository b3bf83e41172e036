/** Documents to score against a query with a reranking (cross-encoder) model. */
export interface RerankRequest {
  /** The id or alias the caller asked for. */
  model: string;
  query: string;
  documents: readonly string[];
}

export interface RerankResult {
  /**
   * One score per document, in input order: the probability, between 0 and 1, that the document is
   * relevant to the query (the sigmoid of the model's relevance logit).
   */
  scores: number[];
  /** Tokens evaluated: each document is evaluated with the query, so the query counts once per document. */
  promptTokens: number;
  /** Time spent loading the model for this request, in ms; 0 when it was resident. */
  loadMs: number;
}
