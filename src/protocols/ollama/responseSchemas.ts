import { z } from "zod";
import { same, type Same } from "../sameShape.js";
import type { ChatResponse, EmbedResponse, ErrorBody, GenerateResponse, ListedModel, RunningModel, ShowResponse } from "./schemas.js";

// Response shapes of the native API as zod schemas, for the OpenAPI description (GET /openapi.json);
// the assertions at the end keep them the same shape as the interfaces the translators return.

export const ollamaErrorSchema = z.object({ error: z.string() });

const metrics = {
  total_duration: z.int().optional(),
  load_duration: z.int().optional(),
  prompt_eval_count: z.int().optional(),
  prompt_eval_cached_count: z.int().optional(),
  prompt_eval_duration: z.int().optional(),
  eval_count: z.int().optional(),
  eval_duration: z.int().optional(),
};
const doneReason = z.enum(["stop", "length", "load", "unload"]).optional();
const toolCall = z.object({
  id: z.string(),
  function: z.object({ index: z.int(), name: z.string(), arguments: z.union([z.record(z.string(), z.unknown()), z.string()]) }),
});

/** One object of /api/chat: the whole answer, or one NDJSON line of a stream. */
export const nativeChatResponseSchema = z.object({
  model: z.string(),
  created_at: z.string(),
  message: z.object({
    role: z.literal("assistant"),
    content: z.string(),
    thinking: z.string().optional(),
    tool_calls: z.array(toolCall).optional(),
  }),
  done: z.boolean(),
  done_reason: doneReason,
  ...metrics,
});

/** One object of /api/generate: the whole answer, or one NDJSON line of a stream. */
export const nativeGenerateResponseSchema = z.object({
  model: z.string(),
  created_at: z.string(),
  response: z.string(),
  thinking: z.string().optional(),
  done: z.boolean(),
  done_reason: doneReason,
  context: z.array(z.int()).optional(),
  ...metrics,
});

/**
 * One NDJSON line of a streamed /api/chat or /api/generate: a chunk, or, when the generation fails
 * after the 200 was sent, the `{"error": …}` line that ends the stream (clients raise it).
 */
export const nativeChatStreamLineSchema = z.union([nativeChatResponseSchema, ollamaErrorSchema]);
export const nativeGenerateStreamLineSchema = z.union([nativeGenerateResponseSchema, ollamaErrorSchema]);

/** GET /api/version. */
export const versionResponseSchema = z.object({ version: z.string() });

/** POST /api/embed: one vector per input. */
export const embedResponseSchema = z.object({
  model: z.string(),
  embeddings: z.array(z.array(z.number())),
  total_duration: z.int(),
  load_duration: z.int(),
  prompt_eval_count: z.int(),
});

/** POST /api/embeddings (legacy): one vector, empty when there was no prompt. */
export const legacyEmbeddingsResponseSchema = z.object({ embedding: z.array(z.number()) });

const details = z.object({
  parent_model: z.string(),
  format: z.literal("gguf"),
  family: z.string(),
  families: z.array(z.string()),
  parameter_size: z.string(),
  quantization_level: z.string(),
});

const listedModel = z.object({ name: z.string(), model: z.string(), modified_at: z.string(), size: z.int(), digest: z.string(), details });

/** GET /api/tags: every installed model and alias. */
export const tagsResponseSchema = z.object({ models: z.array(listedModel) });

const runningModel = z.object({
  name: z.string(),
  model: z.string(),
  size: z.int(),
  digest: z.string(),
  details,
  expires_at: z.string(),
  size_vram: z.int(),
  context_length: z.int(),
});

/** GET /api/ps: the models loaded now. */
export const psResponseSchema = z.object({ models: z.array(runningModel) });

/** POST /api/show. */
export const showResponseSchema = z.object({
  modelfile: z.string(),
  parameters: z.string(),
  template: z.string(),
  details,
  model_info: z.record(z.string(), z.unknown()),
  capabilities: z.array(z.enum(["completion", "tools", "insert", "vision", "embedding", "thinking", "rerank"])),
  modified_at: z.string(),
});

same<Same<z.infer<typeof ollamaErrorSchema>, ErrorBody>>(true);
same<Same<z.infer<typeof listedModel>, ListedModel>>(true);
same<Same<z.infer<typeof runningModel>, RunningModel>>(true);
same<Same<z.infer<typeof embedResponseSchema>, EmbedResponse>>(true);
same<Same<z.infer<typeof showResponseSchema>, ShowResponse>>(true);
same<Same<z.infer<typeof nativeChatResponseSchema>, ChatResponse>>(true);
same<Same<z.infer<typeof nativeGenerateResponseSchema>, GenerateResponse>>(true);
