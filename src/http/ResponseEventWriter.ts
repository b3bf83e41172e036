import type { FastifyReply } from "fastify";
import type { ServerError } from "../core/ServerError.js";
import { toOpenAIError } from "../protocols/openai/toOpenAIError.js";
import type { ResponseErrorEvent, ResponseStreamEvent } from "../protocols/responses/schemas.js";
import { SseWriter } from "./SseWriter.js";

/**
 * The Responses API's typed stream: each event is `event: <type>` then `data: {…}` carrying
 * `sequence_number`, counted from 0 over the whole stream. An error after the start, including a
 * stream cut by shutdown (Drain calls `fail`), is the typed `error` event, numbered like the rest.
 */
export class ResponseEventWriter extends SseWriter {
  #sequence = 0;

  constructor(reply: FastifyReply) {
    super(reply, { namedEvents: true });
  }

  override async send(event: ResponseStreamEvent | ResponseErrorEvent): Promise<boolean> {
    return super.send({ ...event, sequence_number: this.#sequence++ });
  }

  /** The `error` event: OpenAI's error fields (`code` null for internal errors) without the envelope. */
  override async fail(error: ServerError): Promise<void> {
    const { code, message, param } = toOpenAIError(error).error;
    await this.send({ type: "error", code, message, param });
    this.end();
  }
}
