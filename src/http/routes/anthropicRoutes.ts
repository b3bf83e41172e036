import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AccessGate } from "../../access/AccessGate.js";
import type { ChatStream } from "../../core/ChatEvent.js";
import type { Engine } from "../../core/Engine.js";
import { randomBase62 } from "../../core/randomBase62.js";
import { fromCountTokensRequest, fromMessagesRequest } from "../../protocols/anthropic/fromMessagesRequest.js";
import { toAnthropicError } from "../../protocols/anthropic/toAnthropicError.js";
import { MessageStreamTranslator, toMessage, type MessageIdentity } from "../../protocols/anthropic/toMessage.js";
import { engineOptions } from "../engineOptions.js";
import { translated } from "../translated.js";
import { SseWriter } from "../SseWriter.js";
import { toServerError } from "../toServerError.js";
import { described } from "../openapi.js";
import { countTokensResponseSchema, messageSchema, messageStreamEventSchema } from "../../protocols/anthropic/responseSchemas.js";
import { countTokensRequestSchema, messagesRequestSchema } from "../../protocols/anthropic/schemas.js";

const PING = { type: "ping" };

/** `msg_` and 24 random base62 characters, the shape Anthropic's message ids have. */
function newMessageId(): string {
  return `msg_${randomBase62(24)}`;
}

/**
 * Anthropic's Messages API. The `anthropic-version` and `anthropic-beta` headers are accepted
 * whatever their value: there is one version of this API here. In the hosted profile the token
 * may come as `x-api-key` (what the SDK sends) or `Authorization: Bearer` (routePolicy.ts).
 */
export function anthropicRoutes(app: FastifyInstance, { engine, access }: { engine: Engine; access?: AccessGate }): void {
  const config = { access: "caller" as const, errorShape: toAnthropicError };

  app.post("/v1/messages", { config: described(config, { summary: "Anthropic Messages API: a message, plain or streamed (named server-sent events)", body: messagesRequestSchema, response: messageSchema, produces: ["text/event-stream"], streamEvent: messageStreamEventSchema }) }, async (request, reply) => {
    const { chat, stream: streamed } = await translated(engine, request.body, fromMessagesRequest);
    const options = engineOptions(request, reply, access, chat.model, "chat");
    const identity: MessageIdentity = { id: newMessageId(), model: chat.model };
    const events = await engine.chat(chat, options);
    // The stream holds a decoding slot until it is closed: close it on every way out.
    try {
      if (!streamed) return await toMessage(identity, events, events.promptTokens ?? 0);
      await streamMessage(request, reply, identity, events, options.signal);
    } finally {
      await events.return();
    }
  });

  app.post("/v1/messages/count_tokens", { config: described(config, { summary: "The input tokens /v1/messages would render for the same request", body: countTokensRequestSchema, response: countTokensResponseSchema }) }, async (request, reply) => {
    const chat = fromCountTokensRequest(request.body);
    // Admitted as tokenize is: a request that uses no tokens (and in the tiers' `@tokenize` group).
    return { input_tokens: await engine.countTokens(chat, engineOptions(request, reply, access, chat.model, "tokenize")) };
  });
}

async function streamMessage(request: FastifyRequest, reply: FastifyReply, identity: MessageIdentity, events: ChatStream, signal: AbortSignal): Promise<void> {
  // After --stream-keepalive of silence (a long prompt is read before the first token), a ping.
  const sse = new SseWriter(reply, { namedEvents: true, keepalive: PING });
  const translator = new MessageStreamTranslator(identity);
  sse.start();
  try {
    if (!(await sse.send(translator.start(events.promptTokens ?? 0)))) return;
    // As the API does: one ping right after the start, which also tells clients the stream is live.
    if (!(await sse.send(PING))) return;
    for await (const event of events) {
      for (const streamed of translator.push(event)) {
        if (!(await sse.send(streamed))) return;
      }
    }
  } catch (error) {
    // Once the stream has started the status is sent: the error travels as an `error` event.
    if (!signal.aborted) {
      request.log.error({ err: error }, "message stream failed");
      await sse.send(toAnthropicError(toServerError(error)));
    }
  } finally {
    sse.end();
  }
}
