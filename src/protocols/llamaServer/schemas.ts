// llama-server's own endpoints beyond the OpenAI API, which modelhost serves in the same shapes:
// the tokenizer (POST /tokenize, /detokenize: tools/server/server-context.cpp) and reranking
// (POST /v1/rerank: the Jina and Cohere shape that llama-server and vLLM serve). Their errors are
// OpenAI's `{error:{message, type, param, code}}`, as llama-server answers them.
import { z } from "zod";

export const tokenizeRequestSchema = z.object({
  model: z.string().min(1),
  content: z.string(),
  /** Add the model's BOS/EOS (or [CLS]/[SEP]) around the tokens; llama-server's default: false. */
  add_special: z.boolean().nullish(),
  /** Text that spells a special token is that token; llama-server's default: true. */
  parse_special: z.boolean().nullish(),
  with_pieces: z.boolean().nullish(),
});

export const detokenizeRequestSchema = z.object({
  model: z.string().min(1),
  tokens: z.array(z.int().min(0)),
});

/** A document: a string, or (Cohere's and Jina's other form) an object with its `text`. */
const rerankDocument = z.union([z.string(), z.object({ text: z.string() })], {
  error: "expected a string or an object with a string `text`",
});

export const rerankRequestSchema = z.object({
  model: z.string().min(1),
  query: z.string(),
  documents: z.array(rerankDocument),
  top_n: z.int().min(1).nullish(),
  /** Include each document's text in its result; false by default, as Cohere's (llama-server never does). */
  return_documents: z.boolean().nullish(),
});

/** A token with its piece: a string when the piece is valid UTF-8 on its own, else its bytes (as llama-server gives them). */
export interface TokenWithPiece {
  id: number;
  piece: string | number[];
}

export interface TokenizeResponse {
  tokens: number[] | TokenWithPiece[];
}

export interface DetokenizeResponse {
  content: string;
}

export interface RerankResponse {
  model: string;
  object: "list";
  /** Most relevant first; at most `top_n`. */
  results: Array<{ index: number; relevance_score: number; document?: { text: string } }>;
  /** Every token evaluated: the query is read with each document. */
  usage: { prompt_tokens: number; total_tokens: number };
}
