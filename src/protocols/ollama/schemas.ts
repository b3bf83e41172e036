import { z } from "zod";

// Wire shapes of the native API of local runtimes (Ollama's), as its clients send them. Unknown
// fields are stripped, not refused, as that server ignores fields it does not know; known fields
// are checked for type and range. Most fields accept null as "absent": its Go clients send
// zero values that way.

/** A JSON Schema: checked for what grammar-constrained decoding can enforce by the translator. */
const jsonSchemaObject = z.record(z.string(), z.unknown());

/** Base64 images; no model here reads images, so the translator refuses any (with a clear 400). */
const images = z.array(z.string()).nullish();

const toolCall = z.object({
  id: z.string().nullish(),
  function: z.object({
    index: z.int().nullish(),
    name: z.string().min(1),
    /** An object in the native shape; a JSON string (the OpenAI shape) is accepted too. */
    arguments: z.union([jsonSchemaObject, z.string()]).nullish(),
  }),
});

export const chatMessageSchema = z.object({
  // The reference server lower-cases roles before checking them.
  role: z
    .string()
    .transform((role) => role.toLowerCase())
    .pipe(z.enum(["system", "user", "assistant", "tool"], { error: 'expected "system", "user", "assistant" or "tool"' })),
  content: z.string().nullish(),
  thinking: z.string().nullish(),
  images,
  tool_calls: z.array(toolCall).nullish(),
  tool_name: z.string().nullish(),
  tool_call_id: z.string().nullish(),
});

const functionName = z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, "must be 1 to 64 letters, digits, underscores or dashes");

export const toolSchema = z.object({
  type: z.literal("function").nullish(),
  function: z.object({
    name: functionName,
    description: z.string().nullish(),
    parameters: jsonSchemaObject.nullish(),
  }),
});

/**
 * `options`: the sampling and length settings this server applies; load-time settings (num_gpu,
 * num_thread, use_mmap, …) and any other key are accepted and ignored, as the server's own flags
 * decide them.
 */
const optionsSchema = z.looseObject({
  temperature: z.number().min(0).max(100).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  top_k: z.int().min(0).nullish(),
  min_p: z.number().min(0).max(1).nullish(),
  seed: z.int().nullish(),
  num_predict: z.int().min(-2).nullish(),
  num_ctx: z.int().min(0).nullish(),
  stop: z.union([z.string(), z.array(z.string())]).nullish(),
  repeat_penalty: z.number().min(0).nullish(),
  repeat_last_n: z.int().min(-1).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
});

/** `"json"`, a JSON Schema, or `""` (free text). */
const format = z.union([z.literal(["json", ""]), jsonSchemaObject], { error: 'expected "json" or a JSON Schema object' }).nullish();

/** Seconds as a number, or a Go duration such as "5m" or "-1s"; parsed by parseKeepAlive. */
const keepAlive = z.union([z.number(), z.string()], { error: 'expected a number of seconds or a duration such as "5m"' }).nullish();

/** true/false, or an effort level (taken as true); models without a thought section ignore it. */
const think = z.union([z.boolean(), z.enum(["low", "medium", "high", "max"])]).nullish();

const model = z.string({ error: "model is required" }).min(1, "model is required");

/**
 * `tool_choice`, an extension (the reference server has none and ignores it): OpenAI's values, a
 * named function flat as the Responses API and ollama-ai-provider-v2 send it, or nested as chat
 * completions send it.
 */
const toolChoice = z
  .union(
    [
      z.enum(["none", "auto", "required"]),
      z.object({ type: z.literal("function"), name: functionName }),
      z.object({ type: z.literal("function"), function: z.object({ name: functionName }) }),
    ],
    { error: 'expected "none", "auto", "required" or {"type": "function", "name": …}' },
  )
  .nullish()
  .meta({
    description:
      'An extension: "auto" (the default with tools) lets the model decide, "none" shows it no tools, "required" makes it call one, and {"type": "function", "name": …} (or {"type": "function", "function": {"name": …}}) calls that function. Calls are generated under a grammar from the functions\' schemas, as on /v1.',
  });

export const chatRequestSchema = z.object({
  model,
  messages: z.array(chatMessageSchema).nullish(),
  tools: z.array(toolSchema).max(128).nullish(),
  tool_choice: toolChoice,
  format,
  options: optionsSchema.nullish(),
  stream: z.boolean().nullish(),
  keep_alive: keepAlive,
  think,
});

export const generateRequestSchema = z.object({
  model,
  prompt: z.string().nullish(),
  suffix: z.string().nullish(),
  system: z.string().nullish(),
  template: z.string().nullish(),
  raw: z.boolean().nullish(),
  images,
  format,
  options: optionsSchema.nullish(),
  /** Deprecated token context of an earlier reply: accepted and ignored. */
  context: z.array(z.int()).nullish(),
  stream: z.boolean().nullish(),
  keep_alive: keepAlive,
  think,
});

export const embedRequestSchema = z.object({
  model,
  input: z.union([z.string(), z.array(z.string())], { error: "expected a string or an array of strings" }).nullish(),
  truncate: z.boolean().nullish(),
  dimensions: z.int().min(1).nullish(),
  options: optionsSchema.nullish(),
  keep_alive: keepAlive,
});

export const legacyEmbeddingsRequestSchema = z.object({
  model,
  prompt: z.string().nullish(),
  options: optionsSchema.nullish(),
  keep_alive: keepAlive,
});

/** The model a management request names: older clients (and the `ollama` client's pull) send `name` where newer ones send `model`. */
function namedModel(body: { model?: string | null; name?: string | null }, context: z.RefinementCtx): string {
  const name = body.model || body.name;
  if (!name) context.addIssue({ code: "custom", path: ["model"], message: "model is required" });
  return name ?? "";
}

/** show, delete. */
export const modelRequestSchema = z
  .object({ model: z.string().nullish(), name: z.string().nullish(), verbose: z.boolean().nullish() })
  .transform((body, context) => ({ model: namedModel(body, context), verbose: body.verbose === true }));

/** pull: progress streams unless `stream` is false; `insecure` has no meaning here. */
export const pullRequestSchema = z
  .object({ model: z.string().nullish(), name: z.string().nullish(), insecure: z.boolean().nullish(), stream: z.boolean().nullish() })
  .transform((body, context) => ({ model: namedModel(body, context), stream: body.stream ?? true }));

export const copyRequestSchema = z.object({
  source: z.string({ error: "source is required" }).min(1, "source is required"),
  destination: z.string({ error: "destination is required" }).min(1, "destination is required"),
});

export type ChatRequestBody = z.infer<typeof chatRequestSchema>;
export type WireChatMessage = z.infer<typeof chatMessageSchema>;
export type WireTool = z.infer<typeof toolSchema>;
export type WireOptions = z.infer<typeof optionsSchema>;
export type WireFormat = ChatRequestBody["format"];

// Responses.

export interface WireToolCall {
  id: string;
  function: { index: number; name: string; arguments: Record<string, unknown> | string };
}

export interface Metrics {
  total_duration?: number;
  load_duration?: number;
  /** The whole prompt, cached tokens included (Ollama's count since it runs llama-server). */
  prompt_eval_count?: number;
  /** Of those, the tokens served from the prompt cache; absent when none were. */
  prompt_eval_cached_count?: number;
  prompt_eval_duration?: number;
  eval_count?: number;
  eval_duration?: number;
}

export type DoneReason = "stop" | "length" | "load" | "unload";

export interface ChatResponse extends Metrics {
  model: string;
  created_at: string;
  /** thinking: the thought section's text, on the chunks that carry it (absent otherwise). */
  message: { role: "assistant"; content: string; thinking?: string; tool_calls?: WireToolCall[] };
  done: boolean;
  done_reason?: DoneReason;
}

export interface GenerateResponse extends Metrics {
  model: string;
  created_at: string;
  response: string;
  thinking?: string;
  done: boolean;
  done_reason?: DoneReason;
  /** The final object's token context (not in raw mode): always empty here, as none is kept. */
  context?: number[];
}

export interface EmbedResponse {
  model: string;
  embeddings: number[][];
  total_duration: number;
  /** 0 when the model was loaded already. */
  load_duration: number;
  prompt_eval_count: number;
}

export interface ModelDetails {
  parent_model: string;
  format: "gguf";
  family: string;
  families: string[];
  parameter_size: string;
  quantization_level: string;
}

export interface ListedModel {
  name: string;
  model: string;
  modified_at: string;
  size: number;
  digest: string;
  details: ModelDetails;
}

export interface RunningModel {
  name: string;
  model: string;
  size: number;
  digest: string;
  details: ModelDetails;
  expires_at: string;
  size_vram: number;
  context_length: number;
}

/** Ollama's names; "rerank" is ours (Ollama has no reranking), for the reranking models modelhost serves at /v1/rerank. */
export type Capability = "completion" | "tools" | "insert" | "vision" | "embedding" | "thinking" | "rerank";

export interface ShowResponse {
  modelfile: string;
  parameters: string;
  template: string;
  details: ModelDetails;
  model_info: Record<string, unknown>;
  capabilities: Capability[];
  modified_at: string;
}

export interface ErrorBody {
  error: string;
}
