import type { FastifyInstance, FastifyRequest, RouteOptions } from "fastify";
import type { AccessGate, Caller } from "../access/AccessGate.js";
import type { Engine, RequestOptions } from "../core/Engine.js";
import { ServerError } from "../core/ServerError.js";
import { toOllamaError } from "../protocols/ollama/toOllamaError.js";
import { toOpenAIError } from "../protocols/openai/toOpenAIError.js";

/**
 * Who may call a route. "public": anyone (liveness and health probes). "caller": in the hosted
 * profile, only a request with a valid personal access token; in the local profile, anyone.
 * "operator": model management (pull, copy, delete, create…), which is the operator's, through
 * the CLI: in the hosted profile refused (403) even to a valid token; in the local profile, anyone.
 */
export type RouteAccess = "public" | "caller" | "operator";

/** Turns a coded error into one protocol's error body (OpenAI's `{error:{…}}`, Ollama's `{error:"…"}`, …). */
export type ErrorShape = (error: ServerError) => unknown;

declare module "fastify" {
  interface FastifyContextConfig {
    /**
     * Required on every route (a route without it makes the server refuse to start): the policy
     * is the matched route's, never derived from the URL, so no spelling of a path can dodge it.
     */
    access?: RouteAccess;
    /**
     * The shape errors of this route are answered in; default OpenAI's. A protocol's routes set
     * their own, e.g. `{ access: "caller", errorShape: toOllamaError }`, and every error (401s of
     * the hosted hook, 4xx of body parsing, the route's own throws) is then answered in it.
     */
    errorShape?: ErrorShape;
  }
  interface FastifyRequest {
    /** The authenticated caller, in the hosted profile. */
    caller?: Caller;
  }
}

/** The error shape of requests that match no route or do not declare one. */
export const defaultErrorShape: ErrorShape = toOpenAIError;

/** The matched route's error shape; for unmatched URLs, the native API's under /api/ (its clients read that), else the default. */
export function errorShapeOf(request: FastifyRequest): ErrorShape {
  // The target may be in absolute form (`http://host/api/…`).
  return request.routeOptions.config.errorShape ?? (/^(?:[a-z][a-z0-9+.-]*:\/\/[^/]*)?\/api\//i.test(request.url) ? toOllamaError : defaultErrorShape);
}

/**
 * Default deny: registering a route that does not declare its access policy throws at start-up.
 * Must be called before any route is registered. The one exception is @fastify/cors's own
 * `OPTIONS *` route, which answers CORS preflights: browsers send those without credentials
 * (Fetch standard, "CORS-preflight request"), so it is public by nature and carries no data.
 */
export function requireRouteAccess(app: FastifyInstance): void {
  app.addHook("onRoute", (route: RouteOptions) => {
    if (route.method === "OPTIONS" && route.url === "*" && route.config?.access === undefined) {
      route.config = { ...route.config, access: "public" };
      return;
    }
    const access = route.config?.access;
    if (access !== "public" && access !== "caller" && access !== "operator") {
      throw new Error(`Route ${String(route.method)} ${route.url} declares no config.access ("public", "caller" or "operator").`);
    }
  });
}

/**
 * The hosted profile's door. Decides from the MATCHED route's policy, so absolute-form targets
 * (`GET http://any/v1/models`), percent-encoded segments (`/%76%31/models`) or any other spelling
 * that reaches a route meets that route's policy. A request that matches no route needs a caller
 * too (the not-found answer is then 401, so unknown URLs reveal nothing to anonymous clients).
 */
export function authenticateCallers(app: FastifyInstance, gate: AccessGate): void {
  app.addHook("onRequest", async (request) => {
    const access = request.routeOptions.config.access;
    if (access === "public") return;
    request.caller = await gate.authenticate(singleAuthorization(request));
    if (access === "operator") {
      throw new ServerError("forbidden", {
        message: `Tokens may not call ${request.method} ${request.routeOptions.url} on this server: the operator manages models with the modelhost CLI.`,
      });
    }
  });
}

/**
 * The Authorization header, refused when sent more than once: Node keeps only the first of
 * duplicates, and a proxy may read the last, so two headers could authenticate as two different
 * callers. The raw header list still has every copy.
 */
function singleAuthorization(request: FastifyRequest): string | undefined {
  const raw = request.raw.rawHeaders;
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.toLowerCase() === "authorization") count++;
  if (count > 1) {
    throw new ServerError("invalid_api_key", {
      message: "The request has more than one Authorization header, which is ambiguous. Send exactly one: `Authorization: Bearer <token>`.",
    });
  }
  return request.headers.authorization;
}

/**
 * The engine as the hosted profile's routes see it: a chat or embeddings call without an
 * admission (a route that forgot the caller's limits) is a bug, refused as an internal error
 * rather than served for free.
 */
export function requireAdmission(engine: Engine): Engine {
  const admitted = (options: RequestOptions): RequestOptions => {
    if (!options.admit) throw new ServerError("internal_error", { cause: new Error("Hosted profile: an engine call reached the engine without admission.") });
    return options;
  };
  return {
    listModels: () => engine.listModels(),
    findModel: (name) => engine.findModel(name),
    chat: async (request, options) => engine.chat(request, admitted(options)),
    embed: async (request, options) => engine.embed(request, admitted(options)),
    // Loading, unloading and reading models consume no tokens: a caller's token is enough.
    load: (name, options) => engine.load(name, options),
    unload: (name) => engine.unload(name),
    describeModel: (name) => engine.describeModel(name),
    modelDigest: (model) => engine.modelDigest(model),
    status: () => engine.status(),
    close: () => engine.close(),
  };
}
