import type { FastifyInstance } from "fastify";
import { ServerError } from "../core/ServerError.js";
import { toOpenAIError } from "../protocols/openai/toOpenAIError.js";
import { serverAbortReason } from "./abortSignalOf.js";
import { errorStatus } from "./errorStatus.js";
import { toServerError } from "./toServerError.js";

/**
 * Turns a coded error into one protocol's error body (OpenAI's `{error:{…}}`, Ollama's `{error:"…"}`, …).
 * `requestId`: the id of the request an error response answers, for a protocol whose error body
 * names it (Anthropic's `request_id`); absent for an error event inside a stream.
 */
export type ErrorShape = (error: ServerError, requestId?: string) => unknown;

/** The shape each protocol scope answers its errors in; the root, and plugins of its own (e.g. static files), OpenAI's. */
const shapes = new WeakMap<FastifyInstance, ErrorShape>();
const rootShape: ErrorShape = toOpenAIError;

/**
 * The error shape of a Fastify instance: its protocol scope's (see protocolScope), else the root's.
 * A request's is `errorShapeOf(request.server)`, the instance of the route it matched, or for an
 * unknown URL the instance whose not-found handler took it.
 */
export function errorShapeOf(instance: FastifyInstance): ErrorShape {
  return shapes.get(instance) ?? rootShape;
}

/**
 * Registers one protocol's routes in a Fastify plugin scope of their own, under `prefix` (e.g.
 * `/api`, Ollama's), whose errors and unknown URLs are answered in `errorShape`: the 401s and 403s
 * of the root's hooks, the 400s of body parsing, the routes' own throws, and the 404 of any URL
 * under the prefix that no route matches (`/v1/messages/batches`, which this server lacks, in the
 * Messages API's shape). Fastify's encapsulation picks the scope: the matched route's, or for an
 * unknown URL the longest prefix that has a not-found handler. Register scopes after the root's
 * hooks, which a scope inherits when it loads.
 */
export async function protocolScope(
  app: FastifyInstance,
  { prefix, errorShape }: { prefix: string; errorShape: ErrorShape },
  routes: (scope: FastifyInstance) => void,
): Promise<void> {
  await app.register(
    async (scope) => {
      answerErrorsIn(scope, errorShape);
      routes(scope);
    },
    { prefix },
  );
}

/** Answers the errors and the unknown URLs of `instance` (the root, or a protocol scope) in `shape`. */
export function answerErrorsIn(instance: FastifyInstance, shape: ErrorShape = rootShape): void {
  shapes.set(instance, shape);
  instance.setErrorHandler((error, request, reply) => {
    // A request the server itself ended (shutdown) fails with whatever its engine call threw then:
    // the reason it was ended is the answer.
    const serverError = serverAbortReason(reply) ?? toServerError(error);
    const status = errorStatus[serverError.code];
    if (status >= 500 && !reply.raw.destroyed) request.log.error({ err: error }, serverError.message);
    if (serverError.details.retryAfter !== undefined) reply.header("retry-after", String(serverError.details.retryAfter));
    return reply.status(status).send(shape(serverError, request.id));
  });
  instance.setNotFoundHandler((request, reply) => {
    const error = new ServerError("not_found", { message: `Unknown request URL: ${request.method} ${request.url}.` });
    return reply.status(404).send(shape(error, request.id));
  });
}
