import { once } from "node:events";
import type { OutgoingHttpHeaders } from "node:http";
import type { FastifyReply } from "fastify";

/**
 * Writes a server-sent events stream: one `data: <json>` line and a blank line per event, as the
 * OpenAI streaming format and the WHATWG SSE framing require (JSON escapes CR and LF, so each
 * payload is one line). Writes wait for the socket to drain, so a slow reader slows generation
 * instead of growing a buffer without bound.
 */
export class SseWriter {
  readonly #reply: FastifyReply;
  #open = false;

  constructor(reply: FastifyReply) {
    this.#reply = reply;
  }

  get started(): boolean {
    return this.#open;
  }

  /** Sends the status line and headers, including those hooks set on the reply (CORS, limits). */
  start(): void {
    const reply = this.#reply;
    reply.hijack();
    reply.raw.writeHead(200, {
      ...(reply.getHeaders() as OutgoingHttpHeaders),
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      // Tells nginx-style proxies not to buffer the stream.
      "x-accel-buffering": "no",
    });
    this.#open = true;
  }

  /** Resolves when the event is handed to the socket; false if the client has gone. */
  async send(payload: unknown): Promise<boolean> {
    return this.#write(`data: ${JSON.stringify(payload)}\n\n`);
  }

  async done(): Promise<boolean> {
    return this.#write("data: [DONE]\n\n");
  }

  end(): void {
    if (!this.#reply.raw.writableEnded) this.#reply.raw.end();
  }

  async #write(text: string): Promise<boolean> {
    const response = this.#reply.raw;
    if (response.destroyed || response.writableEnded) return false;
    if (response.write(text)) return true;
    await Promise.race([once(response, "drain"), once(response, "close")]);
    return !response.destroyed;
  }
}
