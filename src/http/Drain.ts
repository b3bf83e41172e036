import type { Server } from "node:http";
import type { FastifyInstance, FastifyReply } from "fastify";
import { ServerError } from "../core/ServerError.js";
import { abortRequest } from "./abortSignalOf.js";
import { streamOf } from "./StreamingResponse.js";

/** How long requests cut at the end of the grace period get to unwind (release slots, settle usage). */
const CUT_WAIT_MS = 5_000;
/** How often the engine is asked whether the cut requests have unwound (each takes at most a decode step). */
const ENGINE_POLL_MS = 10;

export interface DrainReport {
  /** Requests in flight when draining began. */
  inFlight: number;
  /** Requests still running when the grace period ended, cut with an error. */
  cut: number;
  /** ms from the start of draining until no request was left. */
  ms: number;
}

/**
 * A server's graceful shutdown. `begin()` stops accepting connections and turns /health
 * not-ready; requests that still arrive on open connections are refused with 503 `engine_unavailable` ("shutting down")
 * (and `Connection: close`), except the public and monitoring routes (/health says "draining").
 * `finish(graceMs)` waits for the requests in flight, then cuts those left: each stream ends with
 * an error event in its protocol's shape, and non-streamed ones are answered with the 503.
 */
export class Drain {
  #draining = false;
  readonly #inFlight = new Set<FastifyReply>();
  readonly #idleWaiters = new Set<() => void>();
  #server: Server | undefined;

  get draining(): boolean {
    return this.#draining;
  }

  /** Tracks every request; to be installed before any route. */
  install(app: FastifyInstance): void {
    this.#server = app.server;
    app.addHook("onRequest", async (request, reply) => {
      this.#inFlight.add(reply);
      reply.raw.once("close", () => {
        this.#inFlight.delete(reply);
        if (this.#inFlight.size === 0) for (const wake of [...this.#idleWaiters]) wake();
      });
      const access = request.routeOptions.config.access;
      // Probes and monitoring go on answering (/health says "draining"); everything else is refused.
      if (this.#draining && access !== "public" && access !== "monitor") {
        reply.header("connection", "close");
        throw new ServerError("engine_unavailable", {
          retryAfter: 1,
          message: "The server is shutting down. Retry the request: another instance, or this one restarted, will take it.",
        });
      }
    });
  }

  /** Starts draining: not-ready, no new connections. */
  begin(): void {
    if (this.#draining) return;
    this.#draining = true;
    // Stops listening and ends idle keep-alive connections (Node ≥ 19 does both in close()). A
    // connection in the middle of sending a request is not idle: it gets its answer (a 503, or
    // /health's "draining"). Fastify's close() at the end ends whatever is left.
    this.#server?.close();
  }

  /** Waits up to `graceMs` for the requests in flight, then cuts the rest and waits for them to unwind. */
  /**
   * `engineIdle` says whether the engine still runs anything: a cut stream's response ends at once,
   * but its generation unwinds (releases its sequence, settles its usage) a moment later, and the
   * usage ledger must only be flushed, and the models freed, after that.
   */
  async finish(graceMs: number, engineIdle: () => boolean = () => true): Promise<DrainReport> {
    this.begin();
    const started = performance.now();
    const inFlight = this.#inFlight.size;
    let cut = 0;
    if (!(await this.#idle(graceMs))) {
      const error = new ServerError("engine_unavailable", {
        message: `The server is shutting down and its grace period for requests in flight (${Math.round(graceMs / 1000)} s) has ended. Retry the request.`,
      });
      const remaining = [...this.#inFlight];
      cut = remaining.length;
      await Promise.all(
        remaining.map(async (reply) => {
          const stream = streamOf(reply.raw);
          // A started stream gets its last event; a request not yet answered is answered 503 by the error handler.
          // (A client whose socket is backed up cannot take that event: it is dropped instead.)
          if (stream) await (reply.raw.writableNeedDrain ? reply.raw.destroy() : stream.fail(error));
          abortRequest(reply, error);
        }),
      );
      await this.#idle(CUT_WAIT_MS);
    }
    const unwound = performance.now() + CUT_WAIT_MS;
    while (!engineIdle() && performance.now() < unwound) await new Promise((resolve) => setTimeout(resolve, ENGINE_POLL_MS));
    return { inFlight, cut, ms: Math.round(performance.now() - started) };
  }

  /** Resolves true when no request is in flight, or false after `ms`. */
  #idle(ms: number): Promise<boolean> {
    if (this.#inFlight.size === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.#idleWaiters.delete(wake);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#idleWaiters.delete(wake);
        resolve(false);
      }, ms);
      this.#idleWaiters.add(wake);
    });
  }
}
