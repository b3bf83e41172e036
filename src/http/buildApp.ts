import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import cookie from "@fastify/cookie";
import cors from "@fastify/cors";
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { AccessGate } from "../access/AccessGate.js";
import type { ResponseArchive } from "../storedResponses/ResponseArchive.js";
import type { AccessService } from "../access/AccessService.js";
import type { SignInService } from "../access/SignInService.js";
import type { Engine } from "../core/Engine.js";
import type { ModelStore } from "../core/ModelStore.js";
import { jsonTextDepth, MAX_JSON_DEPTH } from "../core/jsonLimits.js";
import { ServerError } from "../core/ServerError.js";
import { anthropicErrorSchema } from "../protocols/anthropic/responseSchemas.js";
import { toAnthropicError } from "../protocols/anthropic/toAnthropicError.js";
import { ollamaErrorSchema } from "../protocols/ollama/responseSchemas.js";
import { toOllamaError } from "../protocols/ollama/toOllamaError.js";
import { errorBodySchema } from "../protocols/openai/responseSchemas.js";
import { toOpenAIError } from "../protocols/openai/toOpenAIError.js";
import { limitConnections, serverOptions, type ConnectionLimits } from "./connectionLimits.js";
import { guardBrowsers, hostMatcher } from "./browserGuard.js";
import { corsOriginMatcher } from "./corsOriginMatcher.js";
import { Drain } from "./Drain.js";
import { ServerMetrics } from "./metrics.js";
import type { Registry } from "prom-client";
import { ApiDescription } from "./openapi.js";
import { requestIdOf, returnRequestId } from "./requestId.js";
import { answerErrorsIn, protocolScope } from "./errorShapes.js";
import { guardPlayground } from "./playgroundGuard.js";
import { requireAdmission } from "./requireAdmission.js";
import { resolveImages, type ImagePolicy } from "./imageInput.js";
import { requireRouteAccess } from "./routeAccess.js";
import { authenticateCallers, guardMonitoring } from "./tokenGuards.js";
import { anthropicRoutes } from "./routes/anthropicRoutes.js";
import { healthRoutes } from "./routes/healthRoutes.js";
import { llamaServerRoutes } from "./routes/llamaServerRoutes.js";
import { metricsRoutes } from "./routes/metricsRoutes.js";
import { openApiRoutes } from "./routes/openApiRoutes.js";
import { modelManagementRoutes } from "./routes/modelManagementRoutes.js";
import { ollamaRoutes } from "./routes/ollamaRoutes.js";
import { openaiRoutes } from "./routes/openaiRoutes.js";
import { DEFAULT_PLAYGROUND_DIR, playgroundRoutes } from "./routes/playgroundRoutes.js";
import { responsesRoutes } from "./routes/responsesRoutes.js";
import { PlaygroundSessions } from "./playgroundSessions.js";
import { usageRoutes } from "./routes/usageRoutes.js";
import { setRateLimitHeaders } from "./rateLimitHeaders.js";
import type { StreamLimits } from "./StreamingResponse.js";

/** package.json's version, for the API description (the same path from src/http and dist/http). */
const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;

export interface AppOptions {
  engine: Engine;
  /** The hosted profile: every /v1 and /api request needs a personal access token and counts against its tier. */
  access?: AccessGate;
  /** Stored responses of the Responses API (`store`, `previous_response_id`, GET/DELETE /v1/responses/{id}). */
  responses: ResponseArchive;
  /** Changes the installed models: the native API's copy, delete and pull (`POST /api/pull`). */
  models: ModelStore;
  bodyLimit: number;
  /** What requests' images may be (--max-image*, --image-url*). */
  images: ImagePolicy;
  connections: ConnectionLimits;
  corsOrigins: readonly string[];
  /**
   * The address the server listens on and the --allowed-hosts: which `Host` names it answers
   * (browserGuard.ts). Absent: any (an app driven by inject() in tests).
   */
  hosts?: { listen: string; allowed: readonly string[] };
  /** The built playground page; default web/dist of this package. */
  playgroundDir?: string;
  /** Time limits of streamed responses (keepalive comments, clients that read nothing). */
  streamLimits?: StreamLimits;
  /** The graceful shutdown the server's owner drives (serve.ts); absent, one that is never begun. */
  drain?: Drain;
  /** The hosted profile's playground: its accounts' tokens and its sign-in. */
  playground?: { accounts: AccessService; signIn: SignInService };
  /** Addresses or CIDR ranges of reverse proxies whose X-Forwarded-* headers are believed (--trust-proxy). */
  trustProxy?: readonly string[];
  /**
   * The bearer token GET /metrics requires (--metrics-token). Empty: /metrics is open in the local
   * profile and absent from the hosted one.
   */
  metricsToken?: string;
  /** Metrics of the engine's own parts (the upstreams' endpoints), in /metrics beside the server's. */
  engineMetrics?: (registry: Registry) => void;
  logger?: FastifyBaseLogger;
}

/** The HTTP application, without listening: tests drive it with inject() or listen on port 0. */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    bodyLimit: options.bodyLimit,
    ...(options.logger ? { loggerInstance: options.logger } : { logger: false }),
    // On shutdown, end idle keep-alive connections instead of waiting for clients to drop them.
    forceCloseConnections: "idle",
    // Only the listed proxies' X-Forwarded-For/-Proto/-Host: anyone else could claim any address
    // (dodging the sign-in limits) or https (getting Secure cookies over plain http).
    trustProxy: options.trustProxy && options.trustProxy.length > 0 ? [...options.trustProxy] : false,
    // Our own x-request-id handling (requestId.ts): Fastify's would take any header value as is.
    requestIdHeader: false,
    genReqId: requestIdOf,
    ...serverOptions(options.connections),
  });
  limitConnections(app, options.connections);
  // Before any route (the CORS plugin's included): every route must declare its access policy.
  requireRouteAccess(app);
  // Likewise its entry in GET /openapi.json.
  const api = new ApiDescription({ title: "modelhost", version: PACKAGE_VERSION });
  api.describeErrors(toOpenAIError, "OpenAIError", errorBodySchema);
  api.describeErrors(toOllamaError, "OllamaError", ollamaErrorSchema);
  api.describeErrors(toAnthropicError, "AnthropicError", anthropicErrorSchema);
  api.install(app);
  const drain = options.drain ?? new Drain();
  drain.install(app);
  app.decorate("streamLimits", options.streamLimits ?? { keepaliveMs: 0, stallMs: 0 });
  returnRequestId(app);
  const metrics = new ServerMetrics({
    engine: options.engine,
    ...(options.engineMetrics ? { more: options.engineMetrics } : {}),
    ...(options.access ? { ledger: () => options.access!.ledgerBacklog() } : {}),
  });
  metrics.install(app);

  // Every body is parsed as JSON whatever its Content-Type: curl users often forget the header,
  // and llama-server and Ollama accept such requests too.
  const defaultJson = app.getDefaultJsonParser("error", "error");
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "string" }, (request, body, done) => {
    if (body === "" && request.method !== "POST") return done(null, undefined);
    // Checked before parsing: everything after (schema checks, templates) recurses over the value.
    if (jsonTextDepth(body as string) > MAX_JSON_DEPTH) {
      return done(
        new ServerError("invalid_request", { message: `The JSON body nests deeper than ${MAX_JSON_DEPTH} levels, the most accepted.` }),
        undefined,
      );
    }
    defaultJson(request, body as string, done);
  });

  // The root's errors and unknown URLs in OpenAI's shape; each protocol's scope below has its own.
  answerErrorsIn(app);

  const allowOrigin = corsOriginMatcher(options.corsOrigins);
  // Before the CORS plugin, so a foreign preflight is refused too, and before any body is read;
  // after the error handler, which the plugin's preflight route takes when it is registered.
  const allowHost = options.hosts && hostMatcher(options.hosts.listen, options.hosts.allowed);
  guardBrowsers(app, {
    allowOrigin,
    // The local profile checks no credential, so any page could act as its user on any route; the
    // hosted profile's only ambient credential is the playground's session cookie.
    originChecked: options.access ? (access) => access === "session" || access === "sign-in" : () => true,
    ...(allowHost ? { allowHost } : {}),
  });
  await app.register(cors, {
    origin: (origin, callback) => callback(null, origin === undefined || allowOrigin(origin)),
    // The plugin's default leaves out DELETE, which allowed pages need for /api/delete and
    // DELETE /v1/responses/{id}.
    methods: ["GET", "HEAD", "POST", "DELETE"],
    exposedHeaders: ["retry-after", "x-request-id", "request-id"],
    maxAge: 600,
  });

  // Every generation is measured and logged once, whichever route asked (metrics.ts); in the hosted
  // profile the engine also refuses any call without admission: fail closed.
  const observed = metrics.observe(resolveImages(options.engine, options.images));
  const routeOptions = { ...options, engine: options.access ? requireAdmission(observed) : observed };
  if (options.access) {
    authenticateCallers(app, options.access);
    rateLimitHeaders(app, options.access);
  }
  await app.register(cookie);
  // Hosted: sessions in the access store. Local: no sign-in, and one CSRF token per process (256
  // random bits), handed to the page by GET /playground/api/session.
  const localCsrfToken = randomBytes(32).toString("base64url");
  const sessions = options.access && options.playground ? new PlaygroundSessions(options.playground.signIn) : undefined;
  if (options.access && !sessions) throw new Error("The hosted profile's app needs its playground services (accounts, sign-in).");
  guardPlayground(app, sessions ?? { csrfTokensOf: () => [localCsrfToken] });
  guardMonitoring(app, options.metricsToken ?? "");
  healthRoutes(app, { ...routeOptions, drain });
  openApiRoutes(app, api);
  // Hosted: the operator's metrics are not for tokens; served only behind --metrics-token.
  if (!options.access || options.metricsToken) metricsRoutes(app, metrics);
  // Each protocol in a scope of its own, which answers its errors and unknown URLs in its shape.
  await protocolScope(app, { prefix: "/v1", errorShape: toOpenAIError }, (scope) => {
    openaiRoutes(scope, routeOptions);
    responsesRoutes(scope, routeOptions);
    llamaServerRoutes(scope, routeOptions);
    if (options.access) usageRoutes(scope, options.access);
  });
  await protocolScope(app, { prefix: "/v1/messages", errorShape: toAnthropicError }, (scope) => anthropicRoutes(scope, routeOptions));
  await protocolScope(app, { prefix: "/api", errorShape: toOllamaError }, (scope) => {
    ollamaRoutes(scope, routeOptions);
    modelManagementRoutes(scope, routeOptions);
  });
  // llama-server's own paths (/tokenize, /detokenize, /rerank) at the root too, as llama-server serves them.
  llamaServerRoutes(app, routeOptions);
  const playgroundDir = options.playgroundDir ?? DEFAULT_PLAYGROUND_DIR;
  const hosted =
    sessions && options.playground && options.access
      ? { sessions, accounts: options.playground.accounts, gate: options.access }
      : undefined;
  await playgroundRoutes(app, { engine: routeOptions.engine, playgroundDir, localCsrfToken, ...(hosted ? { hosted } : {}) });
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
