import type { RerankRequest, RerankResult } from "../../core/RerankRequest.js";
import { ServerError } from "../../core/ServerError.js";
import { parseBody } from "../parseBody.js";
import { rerankRequestSchema, type RerankResponse } from "./schemas.js";

/** Cohere's limit on documents per request (Jina's and Voyage's is the same order). */
const MAX_RERANK_DOCUMENTS = 1000;

export interface ParsedRerankRequest {
  rerank: RerankRequest;
  /** How many results to return, most relevant first: all when absent. */
  topN: number | undefined;
  returnDocuments: boolean;
}

/** POST /v1/rerank (and /rerank). */
export function fromRerankRequest(body: unknown): ParsedRerankRequest {
  const wire = parseBody(rerankRequestSchema, body);
  if (wire.documents.length === 0) {
    throw new ServerError("invalid_request", { param: "documents", message: "Invalid value for 'documents': it must not be empty." });
  }
  if (wire.documents.length > MAX_RERANK_DOCUMENTS) {
    throw new ServerError("invalid_request", {
      param: "documents",
      message: `Invalid value for 'documents': at most ${MAX_RERANK_DOCUMENTS} documents per request, got ${wire.documents.length}.`,
    });
  }
  return {
    rerank: {
      model: wire.model,
      query: wire.query,
      documents: wire.documents.map((document) => (typeof document === "string" ? document : document.text)),
    },
    topN: wire.top_n ?? undefined,
    returnDocuments: wire.return_documents ?? false,
  };
}

/** Results sorted by score, highest first (ties in input order), cut to top_n. */
export function toRerankResponse({ rerank, topN, returnDocuments }: ParsedRerankRequest, result: RerankResult): RerankResponse {
  const results = result.scores
    .map((score, index) => ({
      index,
      relevance_score: score,
      ...(returnDocuments ? { document: { text: rerank.documents[index] ?? "" } } : {}),
    }))
    .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
    .slice(0, topN);
  return { model: rerank.model, object: "list", results, usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens } };
}
