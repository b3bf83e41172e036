import { z } from "zod";

// Wire shapes of Anthropic's Messages API (`POST /v1/messages`, `POST /v1/messages/count_tokens`).
// Unknown fields are stripped, not refused (cache_control, citations, service_tier, container, …
// are accepted and ignored); every known field is checked for type and range. Content blocks and
// tools of kinds this server cannot serve get a precise 400 from the translator.

/** A JSON Schema: checked for what grammar-constrained decoding can enforce by the translator. */
const jsonSchemaObject = z.record(z.string(), z.unknown());

/** Anthropic's rule for tool names. */
const toolName = z.string().regex(/^[a-zA-Z0-9_-]{1,128}$/, "must be 1 to 128 letters, digits, underscores or dashes");

const textBlockSchema = z.object({ type: z.literal("text"), text: z.string() });

/** An image: base64 bytes with their media type, or a URL (fetched only where the server allows it). */
const imageBlockSchema = z.object({
  type: z.literal("image"),
  source: z.discriminatedUnion("type", [
    z.object({ type: z.literal("base64"), media_type: z.string(), data: z.string() }),
    z.object({ type: z.literal("url"), url: z.string().min(1) }),
  ]),
});

const toolUseBlockSchema = z.object({
  type: z.literal("tool_use"),
  id: z.string().min(1),
  name: z.string().min(1),
  input: jsonSchemaObject,
});

/** A tool's result: text, or blocks (text and images). */
const toolResultBlockSchema = z.object({
  type: z.literal("tool_result"),
  tool_use_id: z.string().min(1),
  content: z
    .union([z.string(), z.array(z.union([textBlockSchema, imageBlockSchema]))], {
      error: "expected a string or an array of text blocks",
    })
    .optional(),
  is_error: z.boolean().nullish(),
});

/** Earlier thoughts sent back by clients, as the API asks them to: accepted, and not shown to the model again. */
const thinkingBlockSchema = z.object({ type: z.literal("thinking"), thinking: z.string(), signature: z.string().optional() });
const redactedThinkingBlockSchema = z.object({ type: z.literal("redacted_thinking"), data: z.string() });

export const contentBlockTypes = ["text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking"] as const;

/**
 * Any block: the known ones are checked by the translator with their own schema, so a block of
 * another type (document, search_result, server tool blocks…) gets a "not supported" 400 that
 * names it, not a union error.
 */
const anyBlock = z.looseObject({ type: z.string() });

export const contentBlockSchemas = {
  text: textBlockSchema,
  image: imageBlockSchema,
  tool_use: toolUseBlockSchema,
  tool_result: toolResultBlockSchema,
  thinking: thinkingBlockSchema,
  redacted_thinking: redactedThinkingBlockSchema,
} as const satisfies Record<(typeof contentBlockTypes)[number], z.ZodType>;

export type WireContentBlock = {
  [K in keyof typeof contentBlockSchemas]: z.infer<(typeof contentBlockSchemas)[K]>;
}[keyof typeof contentBlockSchemas];

const messageSchema = z.object({
  role: z.enum(["user", "assistant"], { error: 'expected "user" or "assistant" (the system prompt goes in the top-level "system" field)' }),
  content: z.union([z.string(), z.array(anyBlock)], { error: "expected a string or an array of content blocks" }),
});

/**
 * A tool, kept loose here: the translator refuses server tools (`type` other than "custom") by
 * name, then checks a custom tool against `customToolSchema`.
 */
const anyTool = z.looseObject({ type: z.string().nullish() });

export const customToolSchema = z.object({
  type: z.literal("custom").nullish(),
  name: toolName,
  description: z.string().optional(),
  input_schema: jsonSchemaObject,
});

const parallelSwitch = { disable_parallel_tool_use: z.boolean().optional() };
export const toolChoiceSchema = z.discriminatedUnion(
  "type",
  [
    z.object({ type: z.literal("auto"), ...parallelSwitch }),
    z.object({ type: z.literal("any"), ...parallelSwitch }),
    z.object({ type: z.literal("tool"), name: toolName, ...parallelSwitch }),
    z.object({ type: z.literal("none") }),
  ],
  { error: 'expected {"type": "auto" | "any" | "none"} or {"type": "tool", "name": …}' },
);

/** `enabled` (with its budget) and `adaptive` leave thinking on; `disabled` turns it off. */
const thinkingSchema = z.discriminatedUnion(
  "type",
  [
    z.object({ type: z.literal("enabled"), budget_tokens: z.int().min(0) }),
    z.object({ type: z.literal("disabled") }),
    z.object({ type: z.literal("adaptive") }),
    z.object({ type: z.literal("between_tools") }),
  ],
  { error: 'expected {"type": "enabled", "budget_tokens": …}, {"type": "disabled"} or {"type": "adaptive"}' },
);

/** Structured output: `output_config.format` json_schema runs on the same grammar as response_format. */
const outputConfigSchema = z.object({
  format: z.object({ type: z.literal("json_schema"), schema: jsonSchemaObject }).nullish(),
  effort: z.string().nullish(),
});

/** What `count_tokens` takes: everything that shapes the prompt. */
export const countTokensRequestSchema = z.object({
  model: z.string().min(1),
  messages: z.array(messageSchema).min(1),
  system: z.union([z.string(), z.array(textBlockSchema)], { error: "expected a string or an array of text blocks" }).optional(),
  tools: z.array(anyTool).max(128).optional(),
  tool_choice: toolChoiceSchema.optional(),
  thinking: thinkingSchema.optional(),
  output_config: outputConfigSchema.optional(),
});

export const messagesRequestSchema = countTokensRequestSchema.extend({
  max_tokens: z.int().min(1),
  stop_sequences: z.array(z.string().min(1)).max(16).optional(),
  // Anthropic's ranges: temperature 0..1 (default 1), top_p 0..1, top_k ≥ 0.
  temperature: z.number().min(0).max(1).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.int().min(0).optional(),
  stream: z.boolean().optional(),
  metadata: z.object({ user_id: z.string().max(256).nullish() }).optional(),
});

export type CountTokensRequestBody = z.infer<typeof countTokensRequestSchema>;
export type WireToolChoice = z.infer<typeof toolChoiceSchema>;

// Replies, as the official SDK's types declare them.

export type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use";

export interface MessageUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  cache_creation: null;
  server_tool_use: null;
  service_tier: null;
  inference_geo: null;
  /** For a thinking model's reply: how many of the output tokens were the thought's. */
  output_tokens_details: { thinking_tokens: number } | null;
  speed: null;
}

export type ResponseContentBlock =
  | { type: "text"; text: string; citations: null }
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "tool_use"; id: string; name: string; input: unknown; caller: { type: "direct" } };

export interface Message {
  id: string;
  type: "message";
  role: "assistant";
  model: string;
  content: ResponseContentBlock[];
  stop_reason: StopReason | null;
  stop_sequence: string | null;
  stop_details: null;
  container: null;
  diagnostics: null;
  usage: MessageUsage;
}

export type ContentBlockDelta =
  | { type: "text_delta"; text: string }
  | { type: "thinking_delta"; thinking: string }
  | { type: "signature_delta"; signature: string }
  | { type: "input_json_delta"; partial_json: string };

export type MessageStreamEvent =
  | { type: "message_start"; message: Message }
  | { type: "content_block_start"; index: number; content_block: ResponseContentBlock }
  | { type: "content_block_delta"; index: number; delta: ContentBlockDelta }
  | { type: "content_block_stop"; index: number }
  | {
      type: "message_delta";
      delta: { stop_reason: StopReason; stop_sequence: string | null; stop_details: null; container: null };
      usage: {
        input_tokens: number;
        output_tokens: number;
        cache_creation_input_tokens: number;
        cache_read_input_tokens: number;
        server_tool_use: null;
        output_tokens_details: MessageUsage["output_tokens_details"];
      };
    }
  | { type: "message_stop" }
  /** Sent right after `message_start`, and by the writer after --stream-keepalive of silence. */
  | { type: "ping" };

export type AnthropicErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "permission_error"
  | "not_found_error"
  | "request_too_large"
  | "rate_limit_error"
  | "api_error"
  | "overloaded_error";

export interface ErrorBody {
  type: "error";
  error: { type: AnthropicErrorType; message: string };
  /** The request's id (as in its request-id header); error events inside a stream have none. */
  request_id?: string;
}
