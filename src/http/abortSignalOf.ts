import type { ServerResponse } from "node:http";
import type { FastifyReply } from "fastify";
import { ServerError } from "../core/ServerError.js";

/** One controller per response, so the engine call, the stream writer and shutdown share one signal. */
const controllers = new WeakMap<ServerResponse, AbortController>();

function controllerOf(reply: FastifyReply): AbortController {
  const response = reply.raw;
  let controller = controllers.get(response);
  if (!controller) {
    const created = new AbortController();
    controllers.set(response, created);
    response.once("close", () => {
      if (!response.writableFinished) created.abort(new Error("The client closed the connection."));
    });
    controller = created;
  }
  return controller;
}

/**
 * A signal that aborts when the client goes away before the response is complete, streamed or
 * not, or when the server ends the request (shutdown: see abortRequest). The response's "close"
 * event fires on disconnect; a finished response closes too, but then `writableFinished` is
 * already true. Every call for one response returns the same signal.
 */
export function abortSignalOf(reply: FastifyReply): AbortSignal {
  return controllerOf(reply).signal;
}

/**
 * Ends a request's work from the server's side (shutdown): its engine calls stop and throw
 * `reason`, which the error handler answers with if nothing was sent yet (see serverAbortReason).
 */
export function abortRequest(reply: FastifyReply, reason: ServerError): void {
  controllerOf(reply).abort(reason);
}

/** The coded error the server ended this request with, if it did (a client that left is not one). */
export function serverAbortReason(reply: FastifyReply): ServerError | undefined {
  const signal = controllers.get(reply.raw)?.signal;
  return signal?.aborted && signal.reason instanceof ServerError ? signal.reason : undefined;
}
