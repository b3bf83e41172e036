import { z } from "zod";

// Wire shapes of the OpenAI chat-completions API. Unknown fields are stripped, not refused, as OpenAI
// itself ignores fields it does not know; every known field is checked for type and range.

/** Any content part; non-text types get a precise "not supported" error from the translator. */
const contentPart = z.looseObject({ type: z.string() });

const content = z.union([z.string(), z.array(contentPart)], {
  error: "expected a string or an array of content parts",
});

const toolCallSchema = z.object({
  id: z.string().min(1),
  type: z.literal("function"),
  function: z.object({ name: z.string().min(1), arguments: z.string() }),
});

const systemMessage = z.object({ role: z.literal(["system", "developer"]), content, name: z.string().optional() });
const userMessage = z.object({ role: z.literal("user"), content, name: z.string().optional() });
const assistantMessage = z.object({
  role: z.literal("assistant"),
  content: content.nullish(),
  name: z.string().optional(),
  tool_calls: z.array(toolCallSchema).optional(),
  refusal: z.string().nullish(),
  /** The thought the reply began with, as llama-server and vLLM return it and take it back. */
  reasoning_content: z.string().nullish(),
});
const toolMessage = z.object({ role: z.literal("tool"), content, tool_call_id: z.string().min(1) });

export const chatMessageSchema = z.discriminatedUnion("role", [systemMessage, userMessage, assistantMessage, toolMessage]);

/** The name rule of functions and response formats, shared with the Responses API. */
export const functionName = z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, "must be 1 to 64 letters, digits, underscores or dashes");

/** A JSON Schema: checked for what grammar-constrained decoding can enforce by the translator. */
export const jsonSchemaObject = z.record(z.string(), z.unknown());

export const toolSchema = z.object({
  type: z.literal("function"),
  function: z.object({
    name: functionName,
    description: z.string().optional(),
    parameters: jsonSchemaObject.optional(),
    strict: z.boolean().nullish(),
  }),
});

export const toolChoiceSchema = z.union(
  [z.enum(["none", "auto", "required"]), z.object({ type: z.literal("function"), function: z.object({ name: functionName }) })],
  { error: 'expected "none", "auto", "required" or {"type": "function", "function": {"name": …}}' },
);

const responseFormatSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    json_schema: z.object({
      name: functionName,
      description: z.string().optional(),
      schema: z.union([jsonSchemaObject, z.boolean()]).optional(),
      strict: z.boolean().nullish(),
    }),
  }),
]);

/** The sampling fields chat completions and legacy completions share. */
const samplingFields = {
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  stop: z.union([z.string(), z.array(z.string().min(1)).max(4)], { error: "expected a string or an array of up to 4 strings" }).nullish(),
  seed: z.int().nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  logit_bias: z
    .record(z.string().regex(/^\d+$/, "keys must be token ids"), z.number().min(-100).max(100))
    .refine((bias) => Object.keys(bias).length <= 1024, "at most 1024 tokens may be biased")
    .nullish(),
  /** llama-server's per-request LoRA adapters: ids into the model's declared adapters, with their scales; those not listed are off. */
  lora: z
    .array(z.object({ id: z.int().min(0), scale: z.number().min(-100).max(100) }))
    .max(64)
    .nullish(),
};

export const chatCompletionRequestSchema = z.object({
  model: z.string().min(1),
  messages: z.array(chatMessageSchema).min(1),
  max_tokens: z.int().min(1).nullish(),
  max_completion_tokens: z.int().min(1).nullish(),
  ...samplingFields,
  n: z.int().min(1).max(8).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.int().min(0).max(20).nullish(),
  user: z.string().optional(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
  tools: z.array(toolSchema).max(128).nullish(),
  tool_choice: toolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  response_format: responseFormatSchema.nullish(),
  /** "none" turns thinking off on models whose template has a thought section; the levels leave it on (the templates here have no effort setting). */
  reasoning_effort: z.enum(["none", "minimal", "low", "medium", "high", "xhigh", "max"]).nullish(),
  /**
   * llama-server's and vLLM's variables for the chat template; `enable_thinking` (Qwen 3's switch,
   * which those servers and their clients send) is read, the others are the template's and ignored.
   */
  chat_template_kwargs: z.looseObject({ enable_thinking: z.boolean().optional() }).nullish(),
  /** What the request's prompt shares with others, for routing to the cache that holds it (ChatRequest.promptCacheKey). */
  prompt_cache_key: z.string().max(1024).nullish(),
  /** vLLM's prefill: the final assistant message is the start of the reply, which the model continues. */
  continue_final_message: z.boolean().nullish(),
});

export type ChatCompletionRequestBody = z.infer<typeof chatCompletionRequestSchema>;
export type WireChatMessage = z.infer<typeof chatMessageSchema>;

export interface WireToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

interface WireTokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

/** Chat completions' `choices[].logprobs`. */
export interface WireLogprobs {
  content: Array<WireTokenLogprob & { top_logprobs: WireTokenLogprob[] }>;
  refusal: null;
}

export interface ChatCompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
  /** Only for models whose template has a thought section: how many completion tokens were the thought's. */
  completion_tokens_details?: { reasoning_tokens: number };
}

export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: Array<{
    index: number;
    /** reasoning_content: the thought section, apart from the answer (llama-server's and DeepSeek's field); only when there was one. */
    message: { role: "assistant"; content: string | null; reasoning_content?: string; refusal: null; tool_calls?: WireToolCall[] };
    finish_reason: "stop" | "length" | "tool_calls";
    logprobs: WireLogprobs | null;
  }>;
  usage: ChatCompletionUsage;
}

export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: Array<{
    index: number;
    delta: {
      role?: "assistant";
      content?: string;
      reasoning_content?: string;
      tool_calls?: Array<{ index: number; id?: string; type?: "function"; function: { name?: string; arguments: string } }>;
    };
    finish_reason: "stop" | "length" | "tool_calls" | null;
    logprobs: WireLogprobs | null;
  }>;
  /** Present (null, then the totals) only when the caller asked for stream_options.include_usage. */
  usage?: ChatCompletionUsage | null;
}

export interface ModelObject {
  id: string;
  object: "model";
  created: number;
  owned_by: string;
  capabilities: ReadonlyArray<"chat" | "embeddings" | "rerank" | "tools" | "thinking" | "vision">;
}

export interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** input: a string, an array of strings, an array of token ids, or an array of such arrays. */
const tokenIds = z.array(z.int().min(0));
export const embeddingRequestSchema = z.object({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.string()), tokenIds, z.array(tokenIds)], {
    error: "expected a string, an array of strings, an array of token ids, or an array of token-id arrays",
  }),
  encoding_format: z.enum(["float", "base64"]).nullish(),
  dimensions: z.int().min(1).nullish(),
  user: z.string().optional(),
  /** Our extension: cut inputs longer than the model's context instead of refusing them. */
  truncate: z.boolean().nullish(),
});

export interface EmbeddingResponse {
  object: "list";
  data: Array<{ object: "embedding"; index: number; embedding: number[] | string }>;
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

// Legacy completions (POST /v1/completions): a prompt continued as is, no chat template.

/** `prompt`: a string, strings, token ids, or arrays of token ids (one prompt each). */
export const completionRequestSchema = z.object({
  model: z.string().min(1),
  prompt: z.union([z.string(), z.array(z.string()).min(1), tokenIds.min(1), z.array(tokenIds.min(1)).min(1)], {
    error: "expected a string, an array of strings, an array of token ids, or an array of token-id arrays",
  }),
  suffix: z.string().nullish(),
  max_tokens: z.int().min(1).nullish(),
  ...samplingFields,
  n: z.int().min(1).max(8).nullish(),
  best_of: z.int().min(1).max(8).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
  logprobs: z.int().min(0).max(5).nullish(),
  echo: z.boolean().nullish(),
  user: z.string().optional(),
});

/** Legacy completions' `choices[].logprobs`: parallel arrays, one entry per generated token. */
export interface LegacyLogprobs {
  tokens: string[];
  /** null for an echoed prompt's first token, which nothing precedes. */
  token_logprobs: Array<number | null>;
  /** Per token: the most likely tokens and the sampled one, text → logprob (null where token_logprobs is). */
  top_logprobs: Array<Record<string, number> | null>;
  /** Per token: where its text starts in the choice's text, in characters. */
  text_offset: number[];
}

export interface TextCompletionChoice {
  index: number;
  text: string;
  logprobs: LegacyLogprobs | null;
  finish_reason: "stop" | "length" | "tool_calls" | null;
}

/** A legacy completion, or (streamed) one chunk of it: the same object type either way. */
export interface TextCompletion {
  id: string;
  object: "text_completion";
  created: number;
  model: string;
  choices: TextCompletionChoice[];
  /** The three counts only: legacy completions have no cached or reasoning token details. */
  usage?: Pick<ChatCompletionUsage, "prompt_tokens" | "completion_tokens" | "total_tokens"> | null;
}
