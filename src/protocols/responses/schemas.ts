import { z } from "zod";
import { functionName, jsonSchemaObject } from "../openai/schemas.js";

// Wire shapes of OpenAI's Responses API (POST /v1/responses and the stored-response endpoints).
// Unknown fields are stripped, not refused, as OpenAI itself ignores fields it does not know;
// every known field is checked for type and range. Fields this server cannot honour are refused
// by the translator with a message that says so, not silently dropped.

/** Any content part; parts other than text get a precise "not supported" error from the translator. */
const contentPart = z.looseObject({ type: z.string() });
const messageContent = z.union([z.string(), z.array(contentPart)], { error: "expected a string or an array of content parts" });

/** `type: "message"` is optional on input messages (the "easy" form `{role, content}`). */
const inputMessage = z.object({
  type: z.literal("message").optional(),
  id: z.string().min(1).optional(),
  role: z.enum(["user", "system", "developer", "assistant"]),
  content: messageContent,
  status: z.enum(["in_progress", "completed", "incomplete"]).optional(),
});

const functionCallItem = z.object({
  type: z.literal("function_call"),
  id: z.string().min(1).optional(),
  call_id: z.string().min(1),
  name: z.string().min(1),
  /** A JSON text, not an object. */
  arguments: z.string(),
  status: z.enum(["in_progress", "completed", "incomplete"]).optional(),
});

const functionCallOutputItem = z.object({
  type: z.literal("function_call_output"),
  id: z.string().min(1).optional(),
  call_id: z.string().min(1),
  output: z.union([z.string(), z.array(contentPart)], { error: "expected a string or an array of content parts" }),
  status: z.enum(["in_progress", "completed", "incomplete"]).optional(),
});

/** Earlier reasoning, sent back with the rest of an output: the thought of the assistant turn after it, for templates that print one. */
const reasoningItem = z.object({
  type: z.literal("reasoning"),
  id: z.string().min(1).optional(),
  summary: z.array(z.object({ type: z.literal("summary_text"), text: z.string() })).default([]),
  content: z.array(z.object({ type: z.literal("reasoning_text"), text: z.string() })).optional(),
  encrypted_content: z.string().nullish(),
  status: z.enum(["in_progress", "completed", "incomplete"]).optional(),
});

/** An item of an earlier stored response (or of its input), by id: the AI SDK replays its history this way when storing. */
const itemReference = z.object({
  type: z.literal("item_reference"),
  id: z.string().min(1),
});

/** The schema of each input item type this server reads; the translator refuses any other type by name. */
export const inputItemSchemas = {
  message: inputMessage,
  function_call: functionCallItem,
  function_call_output: functionCallOutputItem,
  reasoning: reasoningItem,
  item_reference: itemReference,
} as const;

/** An item's type decides its schema (`type` may be left out of a message), so errors name the field of the type meant. */
const anyItem = z.looseObject({ type: z.string().optional() });

/** Function tools are flat here (chat completions nests them under `function`). Other types: refused by name. */
export const functionToolSchema = z.object({
  type: z.literal("function"),
  name: functionName,
  description: z.string().nullish(),
  parameters: jsonSchemaObject.nullish(),
  strict: z.boolean().nullish(),
});
/** A tool of any type: function tools are then checked by `functionToolSchema`, others refused by name. */
const anyTool = z.looseObject({ type: z.string() });

const toolChoiceSchema = z.union(
  [
    z.enum(["none", "auto", "required"]),
    z.object({ type: z.literal("function"), name: functionName }),
    z.looseObject({ type: z.string() }),
  ],
  { error: 'expected "none", "auto", "required" or {"type": "function", "name": …}' },
);

export const textFormatSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    name: functionName,
    schema: z.union([jsonSchemaObject, z.boolean()]),
    description: z.string().optional(),
    strict: z.boolean().nullish(),
  }),
]);

/** OpenAI's metadata: at most 16 pairs, keys up to 64 characters, values up to 512. */
const metadataSchema = z
  .record(z.string().max(64, "keys must be at most 64 characters"), z.string().max(512, "values must be at most 512 characters"))
  .refine((metadata) => Object.keys(metadata).length <= 16, "at most 16 keys are allowed");

export const createResponseSchema = z.object({
  model: z.string().min(1),
  /** Optional, as in the official client's types: with `previous_response_id` alone the model answers the stored conversation. */
  input: z.union([z.string(), z.array(anyItem)], { error: "expected a string or an array of input items" }).optional(),
  instructions: z.string().nullish(),
  tools: z.array(anyTool).max(128).nullish(),
  tool_choice: toolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  max_output_tokens: z.int().min(1).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  text: z.object({ format: textFormatSchema.optional(), verbosity: z.enum(["low", "medium", "high"]).nullish() }).nullish(),
  reasoning: z
    .object({
      effort: z.enum(["none", "minimal", "low", "medium", "high", "xhigh", "max"]).nullish(),
      summary: z.enum(["auto", "concise", "detailed"]).nullish(),
      generate_summary: z.enum(["auto", "concise", "detailed"]).nullish(),
    })
    .nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_obfuscation: z.boolean().optional() }).nullish(),
  store: z.boolean().nullish(),
  previous_response_id: z.string().min(1).nullish(),
  metadata: metadataSchema.nullish(),
  user: z.string().nullish(),
  safety_identifier: z.string().nullish(),
  prompt_cache_key: z.string().nullish(),
  service_tier: z.enum(["auto", "default", "flex", "scale", "priority"]).nullish(),
  truncation: z.enum(["auto", "disabled"]).nullish(),
  include: z.array(z.string()).nullish(),
  top_logprobs: z.int().min(0).max(20).nullish(),
  background: z.boolean().nullish(),
  conversation: z.unknown().optional(),
  prompt: z.unknown().optional(),
});

export type CreateResponseBody = z.infer<typeof createResponseSchema>;
export type WireTextFormat = z.infer<typeof textFormatSchema>;

/** GET /v1/responses/{id}/input_items: OpenAI's cursor pagination. */
export const inputItemsQuerySchema = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  order: z.enum(["asc", "desc"]).default("desc"),
  after: z.string().min(1).optional(),
  include: z.unknown().optional(),
});

/** GET /v1/responses/{id}: `stream=true` (replaying the events) is not offered. */
export const retrieveQuerySchema = z.object({
  stream: z.enum(["true", "false"]).optional(),
  starting_after: z.unknown().optional(),
  include: z.unknown().optional(),
  include_obfuscation: z.unknown().optional(),
});

// ---- What the server sends ----

export type ItemStatus = "in_progress" | "completed" | "incomplete";

/** A generated token's log-probability and its most likely alternatives (only with `include: ["message.output_text.logprobs"]`). */
export interface WireLogprob {
  token: string;
  bytes: number[];
  logprob: number;
  top_logprobs: Array<{ token: string; bytes: number[]; logprob: number }>;
}

export interface OutputText {
  type: "output_text";
  text: string;
  annotations: never[];
  logprobs: WireLogprob[];
}

export interface InputText {
  type: "input_text";
  text: string;
}

/** An image a user message shows: a data: URL, or an http(s) URL the server fetches where it is allowed to. */
export interface InputImage {
  type: "input_image";
  image_url: string;
  detail: "auto" | "low" | "high";
}

export interface ReasoningText {
  type: "reasoning_text";
  text: string;
}

export interface OutputMessageItem {
  type: "message";
  id: string;
  role: "assistant";
  status: ItemStatus;
  content: OutputText[];
}

export interface InputMessageItem {
  type: "message";
  id: string;
  role: "user" | "system" | "developer";
  status: ItemStatus;
  /** Images in user messages only. */
  content: Array<InputText | InputImage>;
}

export interface FunctionCallItem {
  type: "function_call";
  id: string;
  call_id: string;
  name: string;
  arguments: string;
  status: ItemStatus;
}

export interface FunctionCallOutputItem {
  type: "function_call_output";
  id: string;
  call_id: string;
  output: string;
  status: ItemStatus;
}

export interface ReasoningItem {
  type: "reasoning";
  id: string;
  summary: Array<{ type: "summary_text"; text: string }>;
  content: ReasoningText[];
  status: ItemStatus;
}

export type OutputItem = OutputMessageItem | FunctionCallItem | ReasoningItem;

/** An input item as stored and listed by input_items: every one with an id. */
export type StoredInputItem = InputMessageItem | OutputMessageItem | FunctionCallItem | FunctionCallOutputItem | ReasoningItem;

/** An `item_reference` input item, until the route has looked its item up (see `resolveItemReferences`). */
export interface ItemReference {
  type: "item_reference";
  id: string;
}

export type WireToolChoice = "none" | "auto" | "required" | { type: "function"; name: string };

export interface WireFunctionTool {
  type: "function";
  name: string;
  description: string | null;
  parameters: Record<string, unknown> | null;
  strict: boolean | null;
}

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export type ResponseStatus = "in_progress" | "completed" | "incomplete" | "failed";

/** The response object, with every field the official client's `Response` type declares that applies here. */
export interface ResponseObject {
  id: string;
  object: "response";
  created_at: number;
  status: ResponseStatus;
  completed_at: number | null;
  background: boolean;
  error: { code: string; message: string } | null;
  incomplete_details: { reason: "max_output_tokens" } | null;
  instructions: string | null;
  max_output_tokens: number | null;
  max_tool_calls: null;
  model: string;
  output: OutputItem[];
  /** The official SDK computes it itself; sent too, for clients that read the wire directly. */
  output_text: string;
  parallel_tool_calls: boolean;
  previous_response_id: string | null;
  prompt_cache_key: string | null;
  reasoning: { effort: string | null; summary: string | null };
  safety_identifier: string | null;
  service_tier: string;
  store: boolean;
  temperature: number;
  text: { format: WireTextFormat; verbosity: "low" | "medium" | "high" };
  tool_choice: WireToolChoice;
  tools: WireFunctionTool[];
  top_logprobs: number;
  top_p: number;
  truncation: "auto" | "disabled";
  usage: ResponseUsage | null;
  user: string | null;
  metadata: Record<string, string>;
}

/** The fields of the response object that echo the request's settings. */
export type ResponseSettings = Omit<
  ResponseObject,
  | "id"
  | "object"
  | "created_at"
  | "status"
  | "completed_at"
  | "background"
  | "error"
  | "incomplete_details"
  | "max_tool_calls"
  | "output"
  | "output_text"
  | "usage"
>;

/** One server-sent event of a streamed response; `sequence_number` is set by the writer. */
export type ResponseStreamEvent =
  | {
      type: "response.created" | "response.in_progress" | "response.completed" | "response.incomplete" | "response.failed";
      response: ResponseObject;
    }
  | { type: "response.output_item.added" | "response.output_item.done"; output_index: number; item: OutputItem }
  | {
      type: "response.content_part.added" | "response.content_part.done";
      item_id: string;
      output_index: number;
      content_index: number;
      part: OutputText | ReasoningText;
    }
  | {
      type: "response.output_text.delta";
      item_id: string;
      output_index: number;
      content_index: number;
      delta: string;
      logprobs: WireLogprob[];
    }
  | {
      type: "response.output_text.done";
      item_id: string;
      output_index: number;
      content_index: number;
      text: string;
      logprobs: WireLogprob[];
    }
  | { type: "response.reasoning_text.delta"; item_id: string; output_index: number; content_index: number; delta: string }
  | { type: "response.reasoning_text.done"; item_id: string; output_index: number; content_index: number; text: string }
  | { type: "response.function_call_arguments.delta"; item_id: string; output_index: number; delta: string }
  | { type: "response.function_call_arguments.done"; item_id: string; output_index: number; name: string; arguments: string };

export interface ResponseErrorEvent {
  type: "error";
  code: string | null;
  message: string;
  param: string | null;
}

export interface DeletedResponse {
  id: string;
  object: "response.deleted";
  deleted: true;
}

export interface InputItemList {
  object: "list";
  data: StoredInputItem[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}
