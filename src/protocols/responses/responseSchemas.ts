import { z } from "zod";
import { same, type Same } from "../sameShape.js";
import {
  textFormatSchema,
  type DeletedResponse,
  type InputItemList,
  type ResponseErrorEvent,
  type ResponseObject,
  type ResponseStreamEvent,
} from "./schemas.js";

// The Responses API's replies as zod schemas, for the OpenAPI description (GET /openapi.json) and
// the tests that check recorded responses against it; the assertions at the end keep them the
// same shape as the interfaces the translators return.

const status = z.enum(["in_progress", "completed", "incomplete"]);
const topLogprob = z.object({ token: z.string(), bytes: z.array(z.int()), logprob: z.number() });
const logprobs = z.array(topLogprob.extend({ top_logprobs: z.array(topLogprob) }));
const outputText = z.object({ type: z.literal("output_text"), text: z.string(), annotations: z.array(z.never()), logprobs });
const reasoningText = z.object({ type: z.literal("reasoning_text"), text: z.string() });

const outputMessage = z.object({
  type: z.literal("message"),
  id: z.string(),
  role: z.literal("assistant"),
  status,
  content: z.array(outputText),
});
const inputMessage = z.object({
  type: z.literal("message"),
  id: z.string(),
  role: z.enum(["user", "system", "developer"]),
  status,
  content: z.array(
    z.union([
      z.object({ type: z.literal("input_text"), text: z.string() }),
      z.object({ type: z.literal("input_image"), image_url: z.string(), detail: z.enum(["auto", "low", "high"]) }),
    ]),
  ),
});
const functionCall = z.object({
  type: z.literal("function_call"),
  id: z.string(),
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
  status,
});
const functionCallOutput = z.object({
  type: z.literal("function_call_output"),
  id: z.string(),
  call_id: z.string(),
  output: z.string(),
  status,
});
const reasoning = z.object({
  type: z.literal("reasoning"),
  id: z.string(),
  summary: z.array(z.object({ type: z.literal("summary_text"), text: z.string() })),
  content: z.array(reasoningText),
  status,
});
const outputItem = z.discriminatedUnion("type", [outputMessage, functionCall, reasoning]);

export const responseObjectSchema = z.object({
  id: z.string(),
  object: z.literal("response"),
  created_at: z.int(),
  status: z.enum(["in_progress", "completed", "incomplete", "failed"]),
  completed_at: z.int().nullable(),
  background: z.boolean(),
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  incomplete_details: z.object({ reason: z.literal("max_output_tokens") }).nullable(),
  instructions: z.string().nullable(),
  max_output_tokens: z.int().nullable(),
  max_tool_calls: z.null(),
  model: z.string(),
  output: z.array(outputItem),
  output_text: z.string(),
  parallel_tool_calls: z.boolean(),
  previous_response_id: z.string().nullable(),
  prompt_cache_key: z.string().nullable(),
  reasoning: z.object({ effort: z.string().nullable(), summary: z.string().nullable() }),
  safety_identifier: z.string().nullable(),
  service_tier: z.string(),
  store: z.boolean(),
  temperature: z.number(),
  text: z.object({ format: textFormatSchema, verbosity: z.enum(["low", "medium", "high"]) }),
  tool_choice: z.union([z.enum(["none", "auto", "required"]), z.object({ type: z.literal("function"), name: z.string() })]),
  tools: z.array(
    z.object({
      type: z.literal("function"),
      name: z.string(),
      description: z.string().nullable(),
      parameters: z.record(z.string(), z.unknown()).nullable(),
      strict: z.boolean().nullable(),
    }),
  ),
  top_logprobs: z.int(),
  top_p: z.number(),
  truncation: z.enum(["auto", "disabled"]),
  usage: z
    .object({
      input_tokens: z.int(),
      input_tokens_details: z.object({ cached_tokens: z.int(), cache_write_tokens: z.int() }),
      output_tokens: z.int(),
      output_tokens_details: z.object({ reasoning_tokens: z.int() }),
      total_tokens: z.int(),
    })
    .nullable(),
  user: z.string().nullable(),
  metadata: z.record(z.string(), z.string()),
});

const inContent = { item_id: z.string(), output_index: z.int(), content_index: z.int() };
const numbered = { sequence_number: z.int() };

/** The data of one typed event of a streamed response (its `event:` name is its `type`), numbered from 0; a final `error` event included. */
export const responseStreamEventSchema = z.union([
  z.object({
    type: z.enum(["response.created", "response.in_progress", "response.completed", "response.incomplete", "response.failed"]),
    response: responseObjectSchema,
    ...numbered,
  }),
  z.object({
    type: z.enum(["response.output_item.added", "response.output_item.done"]),
    output_index: z.int(),
    item: outputItem,
    ...numbered,
  }),
  z.object({
    type: z.enum(["response.content_part.added", "response.content_part.done"]),
    ...inContent,
    part: z.union([outputText, reasoningText]),
    ...numbered,
  }),
  z.object({ type: z.literal("response.output_text.delta"), ...inContent, delta: z.string(), logprobs, ...numbered }),
  z.object({ type: z.literal("response.output_text.done"), ...inContent, text: z.string(), logprobs, ...numbered }),
  z.object({ type: z.literal("response.reasoning_text.delta"), ...inContent, delta: z.string(), ...numbered }),
  z.object({ type: z.literal("response.reasoning_text.done"), ...inContent, text: z.string(), ...numbered }),
  z.object({
    type: z.literal("response.function_call_arguments.delta"),
    item_id: z.string(),
    output_index: z.int(),
    delta: z.string(),
    ...numbered,
  }),
  z.object({
    type: z.literal("response.function_call_arguments.done"),
    item_id: z.string(),
    output_index: z.int(),
    name: z.string(),
    arguments: z.string(),
    ...numbered,
  }),
  z.object({ type: z.literal("error"), code: z.string().nullable(), message: z.string(), param: z.string().nullable(), ...numbered }),
]);

export const deletedResponseSchema = z.object({ id: z.string(), object: z.literal("response.deleted"), deleted: z.literal(true) });

/** GET /v1/responses/{id}/input_items: one page of the items, each with its id. */
export const inputItemListSchema = z.object({
  object: z.literal("list"),
  data: z.array(z.union([inputMessage, outputMessage, functionCall, functionCallOutput, reasoning])),
  first_id: z.string().nullable(),
  last_id: z.string().nullable(),
  has_more: z.boolean(),
});

type Unnumbered<T> = T extends unknown ? Omit<T, "sequence_number"> : never;
same<Same<z.infer<typeof responseObjectSchema>, ResponseObject>>(true);
same<Same<Unnumbered<z.infer<typeof responseStreamEventSchema>>, ResponseStreamEvent | ResponseErrorEvent>>(true);
same<Same<z.infer<typeof deletedResponseSchema>, DeletedResponse>>(true);
same<Same<z.infer<typeof inputItemListSchema>, InputItemList>>(true);
