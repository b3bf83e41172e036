import type { EmbedResult } from "../../core/EmbedRequest.js";
import type { EmbeddingResponse } from "./schemas.js";

/**
 * The embeddings reply, vectors in input order. base64 is the little-endian float32 bytes of each
 * vector, which the official clients decode (the npm client asks for it by default).
 */
export function toEmbeddingResponse(model: string, result: EmbedResult, encoding: "float" | "base64"): EmbeddingResponse {
  return {
    object: "list",
    data: result.vectors.map((vector, index) => ({
      object: "embedding",
      index,
      embedding: encoding === "base64" ? toBase64(vector) : Array.from(vector),
    })),
    model,
    usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
  };
}

function toBase64(vector: Float32Array): string {
  const bytes = new DataView(new ArrayBuffer(vector.length * 4));
  vector.forEach((value, i) => bytes.setFloat32(i * 4, value, true));
  return Buffer.from(bytes.buffer).toString("base64");
}
