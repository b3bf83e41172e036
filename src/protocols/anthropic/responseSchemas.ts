import { z } from "zod";
import { same, type Same } from "../sameShape.js";
import type { ErrorBody, Message, MessageStreamEvent } from "./schemas.js";

// The Messages API's replies as zod schemas, for the OpenAPI description (GET /openapi.json) and
// the tests that check recorded responses against it; the assertions at the end keep them the
// same shape as the interfaces the translators return.

const stopReason = z.enum(["end_turn", "max_tokens", "stop_sequence", "tool_use"]);
const outputTokensDetails = z.object({ thinking_tokens: z.int() }).nullable();

const contentBlock = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text"), text: z.string(), citations: z.null() }),
  z.object({ type: z.literal("thinking"), thinking: z.string(), signature: z.string() }),
  z.object({
    type: z.literal("tool_use"),
    id: z.string(),
    name: z.string(),
    input: z.unknown(),
    caller: z.object({ type: z.literal("direct") }),
  }),
]);

export const messageSchema = z.object({
  id: z.string(),
  type: z.literal("message"),
  role: z.literal("assistant"),
  model: z.string(),
  content: z.array(contentBlock),
  stop_reason: stopReason.nullable(),
  stop_sequence: z.string().nullable(),
  stop_details: z.null(),
  container: z.null(),
  diagnostics: z.null(),
  usage: z.object({
    input_tokens: z.int(),
    output_tokens: z.int(),
    cache_creation_input_tokens: z.int(),
    cache_read_input_tokens: z.int(),
    cache_creation: z.null(),
    server_tool_use: z.null(),
    service_tier: z.null(),
    inference_geo: z.null(),
    output_tokens_details: outputTokensDetails,
    speed: z.null(),
  }),
});

export const anthropicErrorSchema = z.object({
  type: z.literal("error"),
  error: z.object({
    type: z.enum([
      "invalid_request_error",
      "authentication_error",
      "permission_error",
      "not_found_error",
      "request_too_large",
      "rate_limit_error",
      "api_error",
      "overloaded_error",
    ]),
    message: z.string(),
  }),
  /** The request's id, as in its request-id header; error events inside a stream have none. */
  request_id: z.string().optional(),
});

/** POST /v1/messages/count_tokens. */
export const countTokensResponseSchema = z.object({ input_tokens: z.int() });

const ping = z.object({ type: z.literal("ping") });

/** The data of one named event of a streamed message (its `event:` name is its `type`): pings and a final error included. */
export const messageStreamEventSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("message_start"), message: messageSchema }),
  z.object({ type: z.literal("content_block_start"), index: z.int(), content_block: contentBlock }),
  z.object({
    type: z.literal("content_block_delta"),
    index: z.int(),
    delta: z.discriminatedUnion("type", [
      z.object({ type: z.literal("text_delta"), text: z.string() }),
      z.object({ type: z.literal("thinking_delta"), thinking: z.string() }),
      z.object({ type: z.literal("signature_delta"), signature: z.string() }),
      z.object({ type: z.literal("input_json_delta"), partial_json: z.string() }),
    ]),
  }),
  z.object({ type: z.literal("content_block_stop"), index: z.int() }),
  z.object({
    type: z.literal("message_delta"),
    delta: z.object({ stop_reason: stopReason, stop_sequence: z.string().nullable(), stop_details: z.null(), container: z.null() }),
    usage: z.object({
      input_tokens: z.int(),
      output_tokens: z.int(),
      cache_creation_input_tokens: z.int(),
      cache_read_input_tokens: z.int(),
      server_tool_use: z.null(),
      output_tokens_details: outputTokensDetails,
    }),
  }),
  z.object({ type: z.literal("message_stop") }),
  ping,
  anthropicErrorSchema,
]);

same<Same<z.infer<typeof messageSchema>, Message>>(true);
same<Same<z.infer<typeof anthropicErrorSchema>, ErrorBody>>(true);
same<Same<Exclude<z.infer<typeof messageStreamEventSchema>, { type: "error" }>, MessageStreamEvent>>(true);
