import { z } from "zod";
import type { TokenizeResult } from "../../core/TokenizeRequest.js";

// The replies of an OpenAI-compatible upstream's embeddings, rerank and tokenizer endpoints, read
// back as the engine's results. An upstream is untrusted input like any other: each reply is
// checked against its shape, and one that does not fit throws an Error naming what is wrong (the
// engine reports it as the endpoint's failure).

/** Token counts as upstreams report them: `prompt_tokens` (OpenAI, llama-server), or only `total_tokens` (vLLM's rerank). */
const usageSchema = z.object({ prompt_tokens: z.int().min(0).optional(), total_tokens: z.int().min(0).optional() });

const embeddingsSchema = z.object({
  data: z.array(z.object({ index: z.int().min(0), embedding: z.array(z.number()) })),
  usage: usageSchema.optional(),
});

const rerankSchema = z.object({
  results: z.array(z.object({ index: z.int().min(0), relevance_score: z.number() })),
  usage: usageSchema.optional(),
});

const tokenizeSchema = z.object({
  tokens: z.union([z.array(z.int()), z.array(z.object({ id: z.int(), piece: z.union([z.string(), z.array(z.int().min(0).max(255))]) }))]),
});

/** llama-server's and modelhost's `content`, vLLM's `prompt`. */
const detokenizeSchema = z.union([z.object({ content: z.string() }), z.object({ prompt: z.string() })]);

function parse<T>(schema: z.ZodType<T>, body: unknown, what: string): T {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new Error(`its ${what} reply is malformed at ${issue.path.join(".") || "its top"}: ${issue.message}`);
}

/** The tokens an upstream says it evaluated; none is an upstream that cannot be settled against, and fails. */
function promptTokensOf(usage: z.infer<typeof usageSchema> | undefined, what: string): number {
  const tokens = usage?.prompt_tokens ?? usage?.total_tokens;
  if (tokens === undefined) throw new Error(`its ${what} reply carries no usage`);
  return tokens;
}

/**
 * Embeddings, one per input in input order, cut to `dimensions` and normalised again as the
 * engine's own are (the first components of a Matryoshka-trained model's vector).
 */
export function fromUpstreamEmbeddings(
  body: unknown,
  inputs: number,
  dimensions: number | undefined,
): { vectors: Float32Array[]; promptTokens: number } {
  const reply = parse(embeddingsSchema, body, "embeddings");
  const vectors: Float32Array[] = new Array(inputs);
  for (const { index, embedding } of reply.data) {
    if (index >= inputs) throw new Error(`its embeddings reply has an index ${index} beyond the ${inputs} inputs`);
    vectors[index] = cutVector(embedding, dimensions);
  }
  if (reply.data.length !== inputs || vectors.some((vector) => vector === undefined)) {
    throw new Error(`its embeddings reply has ${reply.data.length} vectors for ${inputs} inputs`);
  }
  return { vectors, promptTokens: promptTokensOf(reply.usage, "embeddings") };
}

function cutVector(embedding: number[], dimensions: number | undefined): Float32Array {
  if (dimensions === undefined || dimensions >= embedding.length) return Float32Array.from(embedding);
  const cut = embedding.slice(0, dimensions);
  const norm = Math.hypot(...cut) || 1;
  return Float32Array.from(cut, (value) => value / norm);
}

/**
 * Rerank scores in document order, as probabilities: servers that give the model's relevance logit
 * (llama-server) are declared so (`scores: "logit"`) and their scores go through the sigmoid the
 * engine's own reranking applies.
 */
export function fromUpstreamRerank(
  body: unknown,
  documents: number,
  scores: "logit" | "probability",
): { scores: number[]; promptTokens: number } {
  const reply = parse(rerankSchema, body, "rerank");
  const byDocument: number[] = new Array(documents);
  for (const { index, relevance_score: score } of reply.results) {
    if (index >= documents) throw new Error(`its rerank reply has an index ${index} beyond the ${documents} documents`);
    byDocument[index] = scores === "logit" ? 1 / (1 + Math.exp(-score)) : score;
  }
  // Asked without top_n, every server scores every document.
  if (reply.results.length !== documents || byDocument.some((score) => score === undefined)) {
    throw new Error(`its rerank reply scores ${reply.results.length} of ${documents} documents`);
  }
  return { scores: byDocument, promptTokens: promptTokensOf(reply.usage, "rerank") };
}

/** Token ids, and each token's bytes when pieces were asked for (a server that gives none is refused by the caller). */
export function fromUpstreamTokenize(body: unknown, withPieces: boolean): TokenizeResult | undefined {
  const { tokens } = parse(tokenizeSchema, body, "tokenize");
  const ids = tokens.map((token) => (typeof token === "number" ? token : token.id));
  if (!withPieces) return { tokens: ids };
  const pieces = tokens.map((token) =>
    typeof token === "number" ? undefined : typeof token.piece === "string" ? [...Buffer.from(token.piece, "utf8")] : token.piece,
  );
  if (pieces.some((piece) => piece === undefined)) return undefined;
  return { tokens: ids, pieces: pieces as number[][] };
}

export function fromUpstreamDetokenize(body: unknown): string {
  const reply = parse(detokenizeSchema, body, "detokenize");
  return "content" in reply ? reply.content : reply.prompt;
}
