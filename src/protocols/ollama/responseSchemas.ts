import { z } from "zod";
import type { ChatResponse, ErrorBody, GenerateResponse } from "./schemas.js";

// Response shapes of the native API as zod schemas, for the OpenAPI description (GET /openapi.json);
// the assertions at the end keep them the same shape as the interfaces the translators return.

export const ollamaErrorSchema = z.object({ error: z.string() });

const metrics = {
  total_duration: z.int().optional(),
  load_duration: z.int().optional(),
  prompt_eval_count: z.int().optional(),
  prompt_eval_duration: z.int().optional(),
  eval_count: z.int().optional(),
  eval_duration: z.int().optional(),
};
const doneReason = z.enum(["stop", "length", "load", "unload"]).optional();
const toolCall = z.object({ id: z.string(), function: z.object({ index: z.int(), name: z.string(), arguments: z.union([z.record(z.string(), z.unknown()), z.string()]) }) });

/** One object of /api/chat: the whole answer, or one NDJSON line of a stream. */
export const nativeChatResponseSchema = z.object({
  model: z.string(),
  created_at: z.string(),
  message: z.object({ role: z.literal("assistant"), content: z.string(), thinking: z.string().optional(), tool_calls: z.array(toolCall).optional() }),
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
  ...metrics,
});

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const same = <T extends true>(value: T) => value;
same<Same<z.infer<typeof ollamaErrorSchema>, ErrorBody>>(true);
same<Same<z.infer<typeof nativeChatResponseSchema>, ChatResponse>>(true);
same<Same<z.infer<typeof nativeGenerateResponseSchema>, GenerateResponse>>(true);
