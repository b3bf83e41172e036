import { once } from "node:events";
import type { OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { FastifyReply } from "fastify";
import type { ServerError } from "../core/ServerError.js";
import { errorShapeOf } from "./errorShapes.js";

/** Time limits of streamed responses, set once per app (buildApp decorates the instance with them). */
export interface StreamLimits {
  /** ms without a write after which an SSE stream sends a comment line; 0: never. */
  keepaliveMs: number;
  /** ms a write may wait for a client that reads nothing before the connection is dropped; 0: no limit. */
  stallMs: number;
}

declare module "fastify" {
  interface FastifyInstance {
    streamLimits?: StreamLimits;
  }
}

/** The open streams by response, so shutdown can end each in its protocol's shape (see Drain). */
const openStreams = new WeakMap<ServerResponse, StreamingResponse>();

/** The stream writing this response, if it is one that has started. */
export function streamOf(response: ServerResponse): StreamingResponse | undefined {
  return openStreams.get(response);
}

/**
 * A response written piece by piece (server-sent events, NDJSON). Writes wait for the socket to
 * drain, so a slow reader slows generation instead of growing a buffer without bound; a reader
 * that takes nothing for the app's `stallMs` is dropped, freeing its decoding slot.
 */
export abstract class StreamingResponse {
  readonly #reply: FastifyReply;
  readonly #contentType: string;
  readonly #limits: StreamLimits;
  #lastWrite = 0;
  #keepalive: NodeJS.Timeout | undefined;

  constructor(reply: FastifyReply, contentType: string) {
    this.#reply = reply;
    this.#contentType = contentType;
    this.#limits = reply.server.streamLimits ?? { keepaliveMs: 0, stallMs: 0 };
  }

  /** Writes one event in the stream's framing; resolves false if the client has gone. */
  abstract send(payload: unknown): Promise<boolean>;

  /**
   * The text sent when nothing else was for `keepaliveMs` (a comment, which clients ignore), or
   * undefined when the framing has no such thing.
   */
  protected keepaliveText(): string | undefined {
    return undefined;
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
    openStreams.set(reply.raw, this);
    reply.raw.once("close", () => clearTimeout(this.#keepalive));
    this.#lastWrite = performance.now();
    this.#armKeepalive(this.#limits.keepaliveMs);
  }

  /** Ends a stream whose every event went out; a framing with a closing sentinel (OpenAI's `[DONE]`) sends it first. */
  async finish(): Promise<void> {
    this.end();
  }

  end(): void {
    clearTimeout(this.#keepalive);
    if (!this.#reply.raw.writableEnded) this.#reply.raw.end();
  }

  /**
   * Ends the stream with one last event carrying the error, in the route's protocol shape (the
   * shape its errors have; a protocol whose stream errors look otherwise overrides this).
   */
  async fail(error: ServerError): Promise<void> {
    await this.send(errorShapeOf(this.#reply.request.server)(error));
    this.end();
  }

  /** Resolves when the text is handed to the socket; false if the client has gone. */
  protected async write(text: string): Promise<boolean> {
    const response = this.#reply.raw;
    if (response.destroyed || response.writableEnded) return false;
    this.#lastWrite = performance.now();
    if (response.write(text)) return true;
    const stalled = new AbortController();
    const timer = this.#limits.stallMs > 0 ? setTimeout(() => stalled.abort(), this.#limits.stallMs) : undefined;
    try {
      await Promise.race([once(response, "drain", { signal: stalled.signal }), once(response, "close", { signal: stalled.signal })]);
    } catch {
      // The client read nothing for stallMs: drop it, which aborts the request and frees its slot.
      response.destroy();
    } finally {
      clearTimeout(timer);
      stalled.abort();
    }
    return !response.destroyed;
  }

  /** Sends the keepalive text once the stream has been silent for `ms`, and again after each such silence. */
  #armKeepalive(ms: number): void {
    const text = this.keepaliveText();
    if (text === undefined || !(this.#limits.keepaliveMs > 0)) return;
    this.#keepalive = setTimeout(() => {
      const response = this.#reply.raw;
      if (response.destroyed || response.writableEnded) return;
      const silentFor = performance.now() - this.#lastWrite;
      if (silentFor >= this.#limits.keepaliveMs) {
        // Skipped while the socket is backed up: the client is then not idle, only slow.
        if (!response.writableNeedDrain) void this.write(text);
        this.#armKeepalive(this.#limits.keepaliveMs);
      } else {
        this.#armKeepalive(this.#limits.keepaliveMs - silentFor);
      }
    }, ms);
    this.#keepalive.unref();
  }
}
