import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod } from "fastify";
import type { AccessGate } from "../../access/AccessGate.js";
import type { ChatStream } from "../../core/ChatEvent.js";
import type { ChatRequest } from "../../core/ChatRequest.js";
import type { Engine } from "../../core/Engine.js";
import { newChatCompletionId, newTextCompletionId } from "../../protocols/openai/ids.js";
import { ServerError } from "../../core/ServerError.js";
import { fromChatCompletionRequest } from "../../protocols/openai/fromChatCompletionRequest.js";
import { fromEmbeddingRequest } from "../../protocols/openai/fromEmbeddingRequest.js";
import { collectChoice, toChatCompletion, type CollectedChoice } from "../../protocols/openai/toChatCompletion.js";
import { fromCompletionRequest } from "../../protocols/openai/fromCompletionRequest.js";
import { toTextCompletion } from "../../protocols/openai/toTextCompletion.js";
import { TextCompletionStream } from "../../protocols/openai/TextCompletionStream.js";
import { ChatCompletionStream, type ChoiceEvent, type StreamIdentity } from "../../protocols/openai/ChatCompletionStream.js";
import { toEmbeddingResponse } from "../../protocols/openai/toEmbeddingResponse.js";
import { toModelObject } from "../../protocols/openai/toModelObject.js";
import { engineOptions } from "../engineOptions.js";
import { translated } from "../translated.js";
import { interleaveChoices } from "../interleaveChoices.js";
import { SseWriter } from "../SseWriter.js";
import { pumpStream } from "../pumpStream.js";
import type { StreamTranslator } from "../../protocols/StreamTranslator.js";
import { described } from "../openapi.js";
import {
  chatCompletionChunkSchema,
  chatCompletionSchema,
  embeddingResponseSchema,
  modelListSchema,
  modelObjectSchema,
  textCompletionSchema,
} from "../../protocols/openai/responseSchemas.js";
import { chatCompletionRequestSchema, completionRequestSchema, embeddingRequestSchema } from "../../protocols/openai/schemas.js";

/** The chat completions route's description (also the playground's copy of it). */
export const chatCompletionsDoc = {
  summary: "Chat completion, plain or streamed (stream: true, server-sent events of chunks ending with [DONE])",
  body: chatCompletionRequestSchema,
  response: chatCompletionSchema,
  produces: ["text/event-stream"],
  streamEvent: chatCompletionChunkSchema,
};

export function openaiRoutes(app: FastifyInstance, { engine, access }: { engine: Engine; access?: AccessGate }): void {
  const config = { access: "caller" as const };

  app.get(
    "/models",
    { config: described(config, { summary: "Every model and alias", response: modelListSchema }) },
    listModelsHandler(engine),
  );

  // Model ids may contain slashes (e.g. "org/model"), hence the wildcard.
  app.get(
    "/models/*",
    { config: described(config, { summary: "One model (ids may contain slashes)", response: modelObjectSchema }) },
    async (request) => {
      const id = decodedOrRaw((request.params as { "*": string })["*"]);
      const model = await engine.findModel(id);
      if (!model) throw new ServerError("model_not_found", { model: id, param: "model" });
      return toModelObject(model, id);
    },
  );

  app.post(
    "/embeddings",
    {
      config: described(config, {
        summary: "Embeddings of a string, strings or token ids",
        body: embeddingRequestSchema,
        response: embeddingResponseSchema,
      }),
    },
    async (request, reply) => {
      const { embed, encoding } = fromEmbeddingRequest(request.body);
      const result = await engine.embed(embed, engineOptions(request, reply, access, embed.model, "embeddings"));
      return toEmbeddingResponse(embed.model, result, encoding);
    },
  );

  app.post("/chat/completions", { config: described(config, chatCompletionsDoc) }, chatCompletionsHandler(engine, access));

  // Legacy completions: each prompt's n choices decode together; prompts take turns.
  app.post(
    "/completions",
    {
      config: described(config, {
        summary: "Legacy text completion of one or more prompts, plain or streamed (server-sent events)",
        body: completionRequestSchema,
        response: textCompletionSchema,
        produces: ["text/event-stream"],
        streamEvent: textCompletionSchema,
      }),
    },
    async (request, reply) => {
      const { prompts, stream: streamed, includeUsage, logprobs, echo } = await translated(engine, request.body, fromCompletionRequest);
      const [firstPrompt, ...otherPrompts] = prompts as [ChatRequest, ...ChatRequest[]];
      const options = engineOptions(request, reply, access, firstPrompt.model, "chat");
      const identity: StreamIdentity = {
        id: newTextCompletionId(),
        created: Math.floor(Date.now() / 1000),
        model: firstPrompt.model,
        includeUsage,
        logprobs: logprobs !== undefined,
      };
      const opened: ChatStream[] = [];
      const start = async (prompt: ChatRequest) => {
        const choices = await engine.chatChoices(prompt, options);
        opened.push(...choices);
        return choices;
      };
      // The first prompt starts before any byte is sent, so its errors (unknown model, no FIM
      // tokens, too long) get their status; a later prompt starts once the one before has ended.
      const first = await start(firstPrompt);
      async function* batches(): AsyncGenerator<ChatStream[]> {
        yield first;
        for (const prompt of otherPrompts) yield await start(prompt);
      }
      try {
        if (!streamed) {
          const collected: CollectedChoice[][] = [];
          for await (const choices of batches()) collected.push(await Promise.all(choices.map(collectChoice)));
          return toTextCompletion(identity, collected, echo);
        }
        await streamChoices(request, reply, options.signal, batches(), new TextCompletionStream(identity, echo));
      } finally {
        await Promise.all(opened.map((choice) => choice.return()));
      }
    },
  );
}

/** GET /v1/models; the playground's model picker is served by the same handler. */
export function listModelsHandler(engine: Engine): RouteHandlerMethod {
  return async () => {
    const models = await engine.listModels();
    return { object: "list", data: models.flatMap((model) => [model.id, ...model.aliases].map((id) => toModelObject(model, id))) };
  };
}

/**
 * POST /v1/chat/completions, streamed or not. The playground's chat is served by the same handler:
 * the route's access policy decides who the caller is (a token there, a session cookie here), and
 * the caller's limits, ledger and disconnect handling are the same.
 */
export function chatCompletionsHandler(engine: Engine, access: AccessGate | undefined): RouteHandlerMethod {
  return async (request, reply) => {
    const { chat, stream: streamed, includeUsage } = await translated(engine, request.body, fromChatCompletionRequest);
    const options = engineOptions(request, reply, access, chat.model, "chat");
    const identity: StreamIdentity = {
      id: newChatCompletionId(),
      created: Math.floor(Date.now() / 1000),
      model: chat.model,
      includeUsage,
      logprobs: chat.logprobs !== undefined,
    };
    const choices = await engine.chatChoices(chat, options);
    // The streams hold decoding slots until they are closed: close them on every way out, whoever
    // leaves first (a client gone before the first event is written never iterates them at all).
    try {
      if (!streamed) return await toChatCompletion(identity, choices);
      await streamChoices(request, reply, options.signal, [choices], new ChatCompletionStream(identity));
    } finally {
      await Promise.all(choices.map((choice) => choice.return()));
    }
  };
}

/**
 * Streams server-sent events for the choices of one request, ending with `[DONE]`. `batches` are
 * groups of choices started one after the other (the prompts of a legacy completion), each group
 * decoded in parallel; a batch's streams are opened when the previous batch has ended, so its
 * sequences are free. Choice indexes run on across batches; the events of a batch's choices are
 * interleaved as they come.
 */
async function streamChoices(
  request: FastifyRequest,
  reply: FastifyReply,
  signal: AbortSignal,
  batches: Iterable<ChatStream[]> | AsyncIterable<ChatStream[]>,
  translator: StreamTranslator<ChoiceEvent, unknown>,
): Promise<void> {
  async function* choiceEvents(): AsyncGenerator<ChoiceEvent> {
    let prompt = 0;
    let offset = 0;
    for await (const choices of batches) {
      for await (const { choice, event } of interleaveChoices(choices)) yield { prompt, choice: offset + choice, event };
      prompt += 1;
      offset += choices.length;
    }
  }
  await pumpStream(new SseWriter(reply, { doneSentinel: true }), choiceEvents(), translator, { signal, log: request.log });
}

/** A percent-encoded path segment decoded; one that is not valid percent-encoding (`%ff`, `%`) stays as sent, an id no model has (404, not 500). */
function decodedOrRaw(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
