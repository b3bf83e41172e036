import type { FastifyReply } from "fastify";
import { StreamingResponse } from "./StreamingResponse.js";

/**
 * Writes a server-sent events stream: one `data: <json>` line and a blank line per event, as the
 * OpenAI streaming format and the WHATWG SSE framing require (JSON escapes CR and LF, so each
 * payload is one line).
 */
export class SseWriter extends StreamingResponse {
  constructor(reply: FastifyReply) {
    super(reply, "text/event-stream; charset=utf-8");
  }

  /** Resolves when the event is handed to the socket; false if the client has gone. */
  async send(payload: unknown): Promise<boolean> {
    return this.write(`data: ${JSON.stringify(payload)}\n\n`);
  }

  async done(): Promise<boolean> {
    return this.write("data: [DONE]\n\n");
  }
}
