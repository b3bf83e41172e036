import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AccessGate } from "../../access/AccessGate.js";
import type { ChatStream } from "../../core/ChatEvent.js";
import type { Engine } from "../../core/Engine.js";
import { randomBase62 } from "../../core/randomBase62.js";
import { ServerError } from "../../core/ServerError.js";
import { fromChatCompletionRequest } from "../../protocols/openai/fromChatCompletionRequest.js";
import { fromEmbeddingRequest } from "../../protocols/openai/fromEmbeddingRequest.js";
import { toChatCompletion } from "../../protocols/openai/toChatCompletion.js";
import { toChatCompletionChunk, toRoleChunk, type StreamIdentity } from "../../protocols/openai/toChatCompletionChunk.js";
import { toEmbeddingResponse } from "../../protocols/openai/toEmbeddingResponse.js";
import { toModelObject } from "../../protocols/openai/toModelObject.js";
import { toOpenAIError } from "../../protocols/openai/toOpenAIError.js";
import { engineOptions } from "../engineOptions.js";
import { SseWriter } from "../SseWriter.js";
import { toServerError } from "../toServerError.js";

/** `chatcmpl-` and 29 random base62 characters, the shape OpenAI's ids have. */
function newCompletionId(): string {
  return `chatcmpl-${randomBase62(29)}`;
}

export function openaiRoutes(app: FastifyInstance, { engine, access }: { engine: Engine; access?: AccessGate }): void {
  const config = { access: "caller" as const, errorShape: toOpenAIError };

  app.get("/v1/models", { config }, async () => {
    const models = await engine.listModels();
    return { object: "list", data: models.flatMap((model) => [model.id, ...model.aliases].map((id) => toModelObject(model, id))) };
  });

  // Model ids may contain slashes (e.g. "org/model"), hence the wildcard.
  app.get("/v1/models/*", { config }, async (request) => {
    const id = decodeURIComponent((request.params as { "*": string })["*"]);
    const model = await engine.findModel(id);
    if (!model) throw new ServerError("model_not_found", { model: id, param: "model" });
    return toModelObject(model, id);
  });

  app.post("/v1/embeddings", { config }, async (request, reply) => {
    const { embed, encoding } = fromEmbeddingRequest(request.body);
    const result = await engine.embed(embed, engineOptions(request, reply, access, embed.model, "embeddings"));
    return toEmbeddingResponse(embed.model, result, encoding);
  });

  app.post("/v1/chat/completions", { config }, async (request, reply) => {
    const { chat, stream: streamed, includeUsage } = fromChatCompletionRequest(request.body);
    const options = engineOptions(request, reply, access, chat.model, "chat");
    const { signal } = options;
    const identity: StreamIdentity = { id: newCompletionId(), created: Math.floor(Date.now() / 1000), model: chat.model, includeUsage };
    const events = await engine.chat(chat, options);
    // The stream holds a decoding slot until it is closed: close it on every way out, whoever
    // leaves first (a client gone before the first event is written never iterates it at all).
    try {
      if (!streamed) return await toChatCompletion(identity, events);
      await streamChunks(request, reply, identity, events, signal);
    } finally {
      await events.return();
    }
  });
}

async function streamChunks(request: FastifyRequest, reply: FastifyReply, identity: StreamIdentity, events: ChatStream, signal: AbortSignal): Promise<void> {
  const sse = new SseWriter(reply);
  sse.start();
  try {
    if (!(await sse.send(toRoleChunk(identity)))) return;
    for await (const event of events) {
      for (const chunk of toChatCompletionChunk(identity, event)) {
        if (!(await sse.send(chunk))) return;
      }
    }
    await sse.done();
  } catch (error) {
    // Once the stream has started the status is sent: the error travels as one more event.
    if (!signal.aborted) {
      const serverError = toServerError(error);
      request.log.error({ err: error }, "chat stream failed");
      await sse.send(toOpenAIError(serverError));
    }
  } finally {
    sse.end();
  }
}
