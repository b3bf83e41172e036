import type { FastifyReply } from "fastify";

/**
 * A signal that aborts when the client goes away before the response is complete, streamed or
 * not. The response's "close" event fires on disconnect; a finished response closes too, but then
 * `writableFinished` is already true.
 */
export function abortSignalOf(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  const response = reply.raw;
  const onClose = () => {
    if (!response.writableFinished) controller.abort(new Error("The client closed the connection."));
  };
  response.once("close", onClose);
  return controller.signal;
}
