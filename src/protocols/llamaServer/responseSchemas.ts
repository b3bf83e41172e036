import { z } from "zod";
import { same, type Same } from "../sameShape.js";
import type { DetokenizeResponse, RerankResponse, TokenizeResponse } from "./schemas.js";
import type { ApplyTemplateResponse } from "./applyTemplate.js";

// llama-server's tokenizer and rerank replies as zod schemas, for the OpenAPI description (GET
// /openapi.json); the assertions at the end keep them the same shape as the interfaces the
// translators return.

/** Token ids, or with `with_pieces` each id with its piece (text, or bytes when not valid UTF-8 alone). */
export const tokenizeResponseSchema = z.object({
  tokens: z.union([z.array(z.int()), z.array(z.object({ id: z.int(), piece: z.union([z.string(), z.array(z.int())]) }))]),
});

export const detokenizeResponseSchema = z.object({ content: z.string() });

export const rerankResponseSchema = z.object({
  model: z.string(),
  object: z.literal("list"),
  results: z.array(z.object({ index: z.int(), relevance_score: z.number(), document: z.object({ text: z.string() }).optional() })),
  usage: z.object({ prompt_tokens: z.int(), total_tokens: z.int() }),
});

/** The prompt a chat completion's body becomes, special tokens written out. */
export const applyTemplateResponseSchema = z.object({ prompt: z.string() });

same<Same<z.infer<typeof tokenizeResponseSchema>, TokenizeResponse>>(true);
same<Same<z.infer<typeof applyTemplateResponseSchema>, ApplyTemplateResponse>>(true);
same<Same<z.infer<typeof detokenizeResponseSchema>, DetokenizeResponse>>(true);
same<Same<z.infer<typeof rerankResponseSchema>, RerankResponse>>(true);
