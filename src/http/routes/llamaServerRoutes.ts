import type { FastifyInstance } from "fastify";
import type { AccessGate } from "../../access/AccessGate.js";
import type { Engine } from "../../core/Engine.js";
import { fromRerankRequest, toRerankResponse } from "../../protocols/llamaServer/rerank.js";
import {
  fromDetokenizeRequest,
  fromTokenizeRequest,
  toDetokenizeResponse,
  toTokenizeResponse,
} from "../../protocols/llamaServer/tokenizer.js";
import { engineOptions } from "../engineOptions.js";
import { described } from "../openapi.js";
import { toApplyTemplateResponse } from "../../protocols/llamaServer/applyTemplate.js";
import {
  applyTemplateResponseSchema,
  detokenizeResponseSchema,
  rerankResponseSchema,
  tokenizeResponseSchema,
} from "../../protocols/llamaServer/responseSchemas.js";
import { fromChatCompletionRequest } from "../../protocols/openai/fromChatCompletionRequest.js";
import { chatCompletionRequestSchema } from "../../protocols/openai/schemas.js";
import { detokenizeRequestSchema, rerankRequestSchema, tokenizeRequestSchema } from "../../protocols/llamaServer/schemas.js";

/**
 * llama-server's endpoints beyond the OpenAI API: the tokenizer, the chat template's rendering and
 * reranking. Registered twice
 * (buildApp.ts): at the root, where llama-server serves them, and in the /v1 scope, where
 * llama-server also has rerank, and vLLM all three.
 */
export function llamaServerRoutes(app: FastifyInstance, { engine, access }: { engine: Engine; access?: AccessGate }): void {
  const config = { access: "caller" as const };

  app.post(
    "/tokenize",
    {
      config: described(config, {
        summary: "A text's token ids (llama-server's /tokenize)",
        body: tokenizeRequestSchema,
        response: tokenizeResponseSchema,
      }),
    },
    async (request, reply) => {
      const tokenize = fromTokenizeRequest(request.body);
      return toTokenizeResponse(await engine.tokenize(tokenize, engineOptions(request, reply, access, tokenize.model, "tokenize")));
    },
  );

  app.post(
    "/detokenize",
    {
      config: described(config, {
        summary: "Token ids back to text (llama-server's /detokenize)",
        body: detokenizeRequestSchema,
        response: detokenizeResponseSchema,
      }),
    },
    async (request, reply) => {
      const detokenize = fromDetokenizeRequest(request.body);
      return toDetokenizeResponse(await engine.detokenize(detokenize, engineOptions(request, reply, access, detokenize.model, "tokenize")));
    },
  );

  // What a chat completion's prompt is, as the model reads it: for debugging templates (llama-server's endpoint).
  app.post(
    "/apply-template",
    {
      config: described(config, {
        summary: "The prompt a chat completion's body becomes, as the model reads it (llama-server's /apply-template)",
        body: chatCompletionRequestSchema,
        response: applyTemplateResponseSchema,
      }),
    },
    async (request, reply) => {
      const { chat } = fromChatCompletionRequest(request.body);
      return toApplyTemplateResponse(await engine.renderPrompt(chat, engineOptions(request, reply, access, chat.model, "tokenize")));
    },
  );

  app.post(
    "/rerank",
    {
      config: described(config, {
        summary: "Documents scored against a query by a reranking model",
        body: rerankRequestSchema,
        response: rerankResponseSchema,
      }),
    },
    async (request, reply) => {
      const parsed = fromRerankRequest(request.body);
      const result = await engine.rerank(parsed.rerank, engineOptions(request, reply, access, parsed.rerank.model, "rerank"));
      return toRerankResponse(parsed, result);
    },
  );
}
