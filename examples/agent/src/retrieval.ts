// Retrieval: embed texts through the service, and find the stored chunks nearest to a question.
import type OpenAI from "openai";
import type { ChunkStore } from "./store.js";

export type Band = "very strong" | "related" | "weak";

export interface Match {
  text: string;
  source: string;
  position: number;
  /** 1 − cosine distance. */
  similarity: number;
  band: Band;
  /** Above the threshold: put into the prompt. */
  used: boolean;
}

/** How many nearest chunks are considered; those above the threshold are used. */
export const CANDIDATES = 5;

/** Above 0.85 very strong, 0.70 to 0.85 related, below 0.70 weak. */
export function band(similarity: number): Band {
  if (similarity > 0.85) return "very strong";
  if (similarity >= 0.7) return "related";
  return "weak";
}

/** One embeddings request for all the texts. */
export async function embed(client: OpenAI, model: string, texts: string[], signal?: AbortSignal): Promise<Float32Array[]> {
  const reply = await client.embeddings.create({ model, input: texts }, { signal });
  // `data` is in input order by contract; sorting by index costs nothing and trusts no one.
  return [...reply.data].sort((a, b) => a.index - b.index).map((item) => Float32Array.from(item.embedding));
}

export interface Retriever {
  /** The nearest chunks, each marked used when its similarity is above the threshold. */
  search(question: string, signal?: AbortSignal): Promise<Match[]>;
}

export function createRetriever(client: OpenAI, store: ChunkStore, embeddingModel: string, threshold: number): Retriever {
  return {
    async search(question, signal) {
      const [vector] = await embed(client, embeddingModel, [question], signal);
      return store.nearest(vector!, CANDIDATES).map((chunk) => {
        const similarity = 1 - chunk.distance;
        return {
          text: chunk.text,
          source: chunk.source,
          position: chunk.position,
          similarity,
          band: band(similarity),
          used: similarity > threshold,
        };
      });
    },
  };
}
