import { z } from "zod";
import { same, type Same } from "../sameShape.js";
import type { ChatCompletion, ChatCompletionChunk, EmbeddingResponse, ErrorBody, ModelObject, TextCompletion } from "./schemas.js";

// The OpenAI API's response shapes as zod schemas, for the OpenAPI description (GET /openapi.json)
// and the tests that check recorded responses against it. The translators are typed by the
// interfaces in schemas.ts; the assertions at the end keep the two the same shape.

const finishReason = z.enum(["stop", "length", "tool_calls"]);

const tokenLogprob = z.object({ token: z.string(), logprob: z.number(), bytes: z.array(z.int()) });
const logprobs = z.object({ content: z.array(tokenLogprob.extend({ top_logprobs: z.array(tokenLogprob) })), refusal: z.null() }).nullable();

const usage = z.object({
  prompt_tokens: z.int(),
  completion_tokens: z.int(),
  total_tokens: z.int(),
  prompt_tokens_details: z.object({ cached_tokens: z.int() }),
  completion_tokens_details: z.object({ reasoning_tokens: z.int() }).optional(),
});

const toolCall = z.object({ id: z.string(), type: z.literal("function"), function: z.object({ name: z.string(), arguments: z.string() }) });

export const chatCompletionSchema = z.object({
  id: z.string(),
  object: z.literal("chat.completion"),
  created: z.int(),
  model: z.string(),
  choices: z.array(
    z.object({
      index: z.int(),
      message: z.object({
        role: z.literal("assistant"),
        content: z.string().nullable(),
        reasoning_content: z.string().optional(),
        refusal: z.null(),
        tool_calls: z.array(toolCall).optional(),
      }),
      finish_reason: finishReason,
      logprobs,
    }),
  ),
  usage,
});

export const chatCompletionChunkSchema = z.object({
  id: z.string(),
  object: z.literal("chat.completion.chunk"),
  created: z.int(),
  model: z.string(),
  choices: z.array(
    z.object({
      index: z.int(),
      delta: z.object({
        role: z.literal("assistant").optional(),
        content: z.string().optional(),
        reasoning_content: z.string().optional(),
        tool_calls: z
          .array(
            z.object({
              index: z.int(),
              id: z.string().optional(),
              type: z.literal("function").optional(),
              function: z.object({ name: z.string().optional(), arguments: z.string() }),
            }),
          )
          .optional(),
      }),
      finish_reason: finishReason.nullable(),
      logprobs,
    }),
  ),
  usage: usage.nullable().optional(),
});

export const modelObjectSchema = z.object({
  id: z.string(),
  object: z.literal("model"),
  created: z.int(),
  owned_by: z.string(),
  capabilities: z.array(z.enum(["chat", "embeddings", "rerank", "tools", "thinking", "vision"])),
});

export const modelListSchema = z.object({ object: z.literal("list"), data: z.array(modelObjectSchema) });

export const embeddingResponseSchema = z.object({
  object: z.literal("list"),
  data: z.array(z.object({ object: z.literal("embedding"), index: z.int(), embedding: z.union([z.array(z.number()), z.string()]) })),
  model: z.string(),
  usage: z.object({ prompt_tokens: z.int(), total_tokens: z.int() }),
});

/** A legacy completion (/v1/completions), or one chunk of its stream: the same object either way. */
export const textCompletionSchema = z.object({
  id: z.string(),
  object: z.literal("text_completion"),
  created: z.int(),
  model: z.string(),
  choices: z.array(
    z.object({
      index: z.int(),
      text: z.string(),
      logprobs: z
        .object({
          tokens: z.array(z.string()),
          token_logprobs: z.array(z.number().nullable()),
          top_logprobs: z.array(z.record(z.string(), z.number()).nullable()),
          text_offset: z.array(z.int()),
        })
        .nullable(),
      finish_reason: finishReason.nullable(),
    }),
  ),
  usage: z.object({ prompt_tokens: z.int(), completion_tokens: z.int(), total_tokens: z.int() }).nullable().optional(),
});

export const errorBodySchema = z.object({
  error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string().nullable() }),
});

/** Compile-time: each schema's type and its interface are the same shape (sameShape.ts). */
same<Same<z.infer<typeof chatCompletionSchema>, ChatCompletion>>(true);
same<Same<z.infer<typeof chatCompletionChunkSchema>, ChatCompletionChunk>>(true);
same<Same<z.infer<typeof embeddingResponseSchema>, EmbeddingResponse>>(true);
same<Same<z.infer<typeof textCompletionSchema>, TextCompletion>>(true);
same<Same<z.infer<typeof errorBodySchema>, ErrorBody>>(true);
same<Same<z.infer<typeof modelObjectSchema>, ModelObject>>(true);
