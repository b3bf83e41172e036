import { once } from "node:events";
import type { OutgoingHttpHeaders } from "node:http";
import type { FastifyReply } from "fastify";

/**
 * A response written piece by piece (server-sent events, NDJSON). Writes wait for the socket to
 * drain, so a slow reader slows generation instead of growing a buffer without bound.
 */
export class StreamingResponse {
  readonly #reply: FastifyReply;
  readonly #contentType: string;

  constructor(reply: FastifyReply, contentType: string) {
    this.#reply = reply;
    this.#contentType = contentType;
  }

  /** Sends the status line and headers, including those hooks set on the reply (CORS, limits). */
  start(): void {
    const reply = this.#reply;
    reply.hijack();
    reply.raw.writeHead(200, {
      ...(reply.getHeaders() as OutgoingHttpHeaders),
      "content-type": this.#contentType,
      "cache-control": "no-cache",
      // No `connection` header: Node keeps HTTP/1.1 connections alive by itself, and closes them
      // when the client sent `Connection: close`, which a forced `keep-alive` would override.
      // Tells nginx-style proxies not to buffer the stream.
      "x-accel-buffering": "no",
    });
  }

  end(): void {
    if (!this.#reply.raw.writableEnded) this.#reply.raw.end();
  }

  /** Resolves when the text is handed to the socket; false if the client has gone. */
  protected async write(text: string): Promise<boolean> {
    const response = this.#reply.raw;
    if (response.destroyed || response.writableEnded) return false;
    if (response.write(text)) return true;
    await Promise.race([once(response, "drain"), once(response, "close")]);
    return !response.destroyed;
  }
}
