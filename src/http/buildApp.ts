import cors from "@fastify/cors";
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from "fastify";
import type { Engine } from "../core/Engine.js";
import { ServerError } from "../core/ServerError.js";
import { toOpenAIError } from "../protocols/openai/toOpenAIError.js";
import { corsOriginMatcher } from "./corsOriginMatcher.js";
import { errorStatus } from "./errorStatus.js";
import { healthRoutes } from "./routes/healthRoutes.js";
import { openaiRoutes } from "./routes/openaiRoutes.js";
import { toServerError } from "./toServerError.js";

export interface AppOptions {
  engine: Engine;
  bodyLimit: number;
  corsOrigins: readonly string[];
  logger?: FastifyBaseLogger;
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** Which wire format the route speaks, so errors are answered in that protocol's shape. */
    protocol?: "openai";
  }
}

/** The HTTP application, without listening: tests drive it with inject() or listen on port 0. */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    bodyLimit: options.bodyLimit,
    ...(options.logger ? { loggerInstance: options.logger } : { logger: false }),
    // On shutdown, end idle keep-alive connections instead of waiting for clients to drop them.
    forceCloseConnections: "idle",
  });

  // Every body is parsed as JSON whatever its Content-Type: curl users often forget the header,
  // and llama-server and Ollama accept such requests too.
  const defaultJson = app.getDefaultJsonParser("error", "error");
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "string" }, (request, body, done) => {
    if (body === "" && request.method !== "POST") return done(null, undefined);
    defaultJson(request, body as string, done);
  });

  const allowOrigin = corsOriginMatcher(options.corsOrigins);
  await app.register(cors, {
    origin: (origin, callback) => callback(null, origin === undefined || allowOrigin(origin)),
    exposedHeaders: ["retry-after", "x-request-id"],
    maxAge: 600,
  });

  app.setErrorHandler((error, request, reply) => {
    const serverError = toServerError(error);
    const status = errorStatus[serverError.code];
    if (status >= 500 && !reply.raw.destroyed) request.log.error({ err: error }, serverError.message);
    if (serverError.details.retryAfter !== undefined) reply.header("retry-after", String(serverError.details.retryAfter));
    return reply.status(status).send(errorBody(request, serverError));
  });

  app.setNotFoundHandler((request, reply) => {
    const error = new ServerError("not_found", { message: `Unknown request URL: ${request.method} ${request.url}.` });
    return reply.status(404).send(errorBody(request, error));
  });

  healthRoutes(app, options);
  openaiRoutes(app, options);
  return app;
}

function errorBody(_request: FastifyRequest, error: ServerError): unknown {
  // Only the OpenAI protocol is served so far; the native API (/api/*) will answer in its own shape.
  return toOpenAIError(error);
}
