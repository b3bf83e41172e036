import cors from "@fastify/cors";
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { AccessGate } from "../access/AccessGate.js";
import type { Engine } from "../core/Engine.js";
import { jsonTextDepth, MAX_JSON_DEPTH } from "../core/jsonLimits.js";
import { ServerError } from "../core/ServerError.js";
import { limitConnections, serverOptions, type ConnectionLimits } from "./connectionLimits.js";
import { corsOriginMatcher } from "./corsOriginMatcher.js";
import { errorStatus } from "./errorStatus.js";
import { authenticateCallers, errorShapeOf, requireAdmission, requireRouteAccess } from "./routePolicy.js";
import { healthRoutes } from "./routes/healthRoutes.js";
import { modelManagementRoutes, type PullModel } from "./routes/modelManagementRoutes.js";
import { ollamaRoutes } from "./routes/ollamaRoutes.js";
import { openaiRoutes } from "./routes/openaiRoutes.js";
import { usageRoutes } from "./routes/usageRoutes.js";
import { setRateLimitHeaders } from "./rateLimitHeaders.js";
import { toServerError } from "./toServerError.js";

export interface AppOptions {
  engine: Engine;
  /** The hosted profile: every /v1 and /api request needs a personal access token and counts against its tier. */
  access?: AccessGate;
  /** The models directory: the native API's copy and delete change it. */
  modelsDir: string;
  /** Pulls a model into the models directory (`POST /api/pull`). */
  pull: PullModel;
  bodyLimit: number;
  connections: ConnectionLimits;
  corsOrigins: readonly string[];
  logger?: FastifyBaseLogger;
}

/** The HTTP application, without listening: tests drive it with inject() or listen on port 0. */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    bodyLimit: options.bodyLimit,
    ...(options.logger ? { loggerInstance: options.logger } : { logger: false }),
    // On shutdown, end idle keep-alive connections instead of waiting for clients to drop them.
    forceCloseConnections: "idle",
    ...serverOptions(options.connections),
  });
  limitConnections(app, options.connections);
  // Before any route (the CORS plugin's included): every route must declare its access policy.
  requireRouteAccess(app);

  // Every body is parsed as JSON whatever its Content-Type: curl users often forget the header,
  // and llama-server and Ollama accept such requests too.
  const defaultJson = app.getDefaultJsonParser("error", "error");
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "string" }, (request, body, done) => {
    if (body === "" && request.method !== "POST") return done(null, undefined);
    // Checked before parsing: everything after (schema checks, templates) recurses over the value.
    if (jsonTextDepth(body as string) > MAX_JSON_DEPTH) {
      return done(new ServerError("invalid_request", { message: `The JSON body nests deeper than ${MAX_JSON_DEPTH} levels, the most accepted.` }), undefined);
    }
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
    // Each route answers in its protocol's shape (route config `errorShape`, see routePolicy.ts).
    return reply.status(status).send(errorShapeOf(request)(serverError));
  });

  app.setNotFoundHandler((request, reply) => {
    const error = new ServerError("not_found", { message: `Unknown request URL: ${request.method} ${request.url}.` });
    return reply.status(404).send(errorShapeOf(request)(error));
  });

  // In the hosted profile the engine refuses any call without admission: fail closed.
  const routeOptions = { ...options, engine: options.access ? requireAdmission(options.engine) : options.engine };
  if (options.access) {
    authenticateCallers(app, options.access);
    rateLimitHeaders(app, options.access);
    usageRoutes(app, options.access);
  }
  healthRoutes(app, routeOptions);
  openaiRoutes(app, routeOptions);
  ollamaRoutes(app, routeOptions);
  modelManagementRoutes(app, routeOptions);
  return app;
}

/**
 * The caller's x-ratelimit-* headers on every response: routes that admit a request set them at
 * admission (so a stream has them before its first byte); the others get the state as it stands.
 */
function rateLimitHeaders(app: FastifyInstance, gate: AccessGate): void {
  app.addHook("onSend", async (request, reply, payload) => {
    if (request.caller && !reply.hasHeader("x-ratelimit-limit-requests") && !reply.hasHeader("x-ratelimit-limit-tokens")) {
      try {
        setRateLimitHeaders(reply, await gate.state(request.caller));
      } catch {
        // The limiter is unreachable: the response goes out without the headers rather than not at all.
      }
    }
    return payload;
  });
}
