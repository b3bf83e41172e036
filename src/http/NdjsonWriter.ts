import type { FastifyReply } from "fastify";
import { StreamingResponse } from "./StreamingResponse.js";

/**
 * Writes newline-delimited JSON, the native API's stream: one object per line, each ending in
 * `\n`, no sentinel (JSON escapes line breaks, so an object is always one line).
 */
export class NdjsonWriter extends StreamingResponse {
  constructor(reply: FastifyReply) {
    super(reply, "application/x-ndjson");
  }

  /** Resolves when the object is handed to the socket; false if the client has gone. */
  async send(payload: unknown): Promise<boolean> {
    return this.write(`${JSON.stringify(payload)}\n`);
  }
}
