import type { FastifyInstance } from "fastify";
import type { AccessGate } from "../../access/AccessGate.js";
import type { Engine } from "../../core/Engine.js";
import { fromCountTokensRequest, fromMessagesRequest } from "../../protocols/anthropic/fromMessagesRequest.js";
import { toMessage } from "../../protocols/anthropic/toMessage.js";
import { newMessageId } from "../../protocols/anthropic/ids.js";
import { MessageStream, PING, type MessageIdentity } from "../../protocols/anthropic/MessageStream.js";
import { engineOptions } from "../engineOptions.js";
import { translated } from "../translated.js";
import { SseWriter } from "../SseWriter.js";
import { pumpStream } from "../pumpStream.js";
import { described } from "../openapi.js";
import { countTokensResponseSchema, messageSchema, messageStreamEventSchema } from "../../protocols/anthropic/responseSchemas.js";
import { countTokensRequestSchema, messagesRequestSchema } from "../../protocols/anthropic/schemas.js";

/**
 * Anthropic's Messages API. The `anthropic-version` and `anthropic-beta` headers are accepted
 * whatever their value: there is one version of this API here. In the hosted profile the token
 * may come as `x-api-key` (what the SDK sends) or `Authorization: Bearer` (credentials.ts).
 */
export function anthropicRoutes(app: FastifyInstance, { engine, access }: { engine: Engine; access?: AccessGate }): void {
  const config = { access: "caller" as const };

  app.post(
    "",
    {
      config: described(config, {
        summary: "Anthropic Messages API: a message, plain or streamed (named server-sent events)",
        body: messagesRequestSchema,
        response: messageSchema,
        produces: ["text/event-stream"],
        streamEvent: messageStreamEventSchema,
      }),
    },
    async (request, reply) => {
      const { chat, stream: streamed } = await translated(engine, request.body, fromMessagesRequest);
      const options = engineOptions(request, reply, access, chat.model, "chat");
      const identity: MessageIdentity = { id: newMessageId(), model: chat.model };
      const events = await engine.chat(chat, options);
      // The stream holds a decoding slot until it is closed: close it on every way out.
      try {
        if (!streamed) return await toMessage(identity, events, events.promptTokens ?? 0);
        // After --stream-keepalive of silence (a long prompt is read before the first token), a ping.
        const sse = new SseWriter(reply, { namedEvents: true, keepalive: PING });
        await pumpStream(sse, events, new MessageStream(identity, events.promptTokens ?? 0), { signal: options.signal, log: request.log });
      } finally {
        await events.return();
      }
    },
  );

  app.post(
    "/count_tokens",
    {
      config: described(config, {
        summary: "The input tokens /v1/messages would render for the same request",
        body: countTokensRequestSchema,
        response: countTokensResponseSchema,
      }),
    },
    async (request, reply) => {
      const chat = fromCountTokensRequest(request.body);
      // Admitted as tokenize is: a request that uses no tokens (and in the tiers' `@tokenize` group).
      const { tokenCount } = await engine.renderPrompt(chat, engineOptions(request, reply, access, chat.model, "tokenize"));
      return { input_tokens: tokenCount };
    },
  );
}
