import { timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyRequest, RouteOptions } from "fastify";
import type { AccessGate, Caller } from "../access/AccessGate.js";
import type { Engine, RequestOptions } from "../core/Engine.js";
import { ServerError } from "../core/ServerError.js";
import { ownOrigin } from "./browserGuard.js";
import { toAnthropicError } from "../protocols/anthropic/toAnthropicError.js";
import { toOllamaError } from "../protocols/ollama/toOllamaError.js";
import { toOpenAIError } from "../protocols/openai/toOpenAIError.js";

/**
 * Who may call a route. "public": anyone (liveness and health probes, the playground's static
 * files). "caller": in the hosted profile, only a request with a valid personal access token; in
 * the local profile, anyone. "operator": model management (pull, copy, delete, create…), which is
 * the operator's, through the CLI: in the hosted profile refused (403) even to a valid token; in
 * the local profile, anyone.
 *
 * The browser playground's API (see guardPlayground) has two more, which never look at a token:
 * "session": in the hosted profile only a request with a valid session cookie, whose account is
 * then the caller; in the local profile, anyone. "sign-in": anyone (signing in and out, and asking
 * who is signed in). On both, a state-changing method (POST, DELETE…) also needs the CSRF proof.
 *
 * "monitor": the operator's monitoring (GET /metrics), behind guardMonitoring: when a metrics
 * token is set (--metrics-token), only a request bearing it; otherwise anyone (the hosted profile
 * then does not register its routes at all). Personal access tokens give nothing there.
 */
export type RouteAccess = "public" | "caller" | "operator" | "session" | "sign-in" | "monitor";

const routeAccessKinds: ReadonlySet<string> = new Set<RouteAccess>(["public", "caller", "operator", "session", "sign-in", "monitor"]);

/**
 * Turns a coded error into one protocol's error body (OpenAI's `{error:{…}}`, Ollama's `{error:"…"}`, …).
 * `requestId`: the id of the request an error response answers, for a protocol whose error body
 * names it (Anthropic's `request_id`); absent for an error event inside a stream.
 */
export type ErrorShape = (error: ServerError, requestId?: string) => unknown;

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
const defaultErrorShape: ErrorShape = toOpenAIError;

/**
 * The matched route's error shape; for unmatched URLs, the shape their clients read: the native
 * API's under /api/, the Messages API's under /v1/messages (e.g. the batches this server lacks),
 * else the default.
 */
export function errorShapeOf(request: FastifyRequest): ErrorShape {
  const configured = request.routeOptions.config.errorShape;
  if (configured) return configured;
  // The target may be in absolute form (`http://host/api/…`).
  const path = request.url.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, "");
  if (/^\/api\//i.test(path)) return toOllamaError;
  if (/^\/v1\/messages(?:[/?]|$)/i.test(path)) return toAnthropicError;
  return defaultErrorShape;
}

/**
 * Default deny: registering a route that does not declare its access policy throws at start-up.
 * Must be called before any route is registered. The one exception is @fastify/cors's own
 * `OPTIONS *` route, which answers CORS preflights: browsers send those without credentials
 * (Fetch standard, "CORS-preflight request"), so it is public by nature and carries no data.
 */
export function requireRouteAccess(app: FastifyInstance): void {
  const declared: DeclaredRoute[] = [];
  routeLists.set(app, declared);
  app.addHook("onRoute", (route: RouteOptions) => {
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).map(String);
    if (route.method === "OPTIONS" && route.url === "*" && route.config?.access === undefined) {
      route.config = { ...route.config, access: "public" };
      declared.push({ methods, url: route.url, access: "public" });
      return;
    }
    const access = route.config?.access;
    if (access === undefined || !routeAccessKinds.has(access)) {
      throw new Error(
        `Route ${String(route.method)} ${route.url} declares no config.access (${[...routeAccessKinds].map((kind) => `"${kind}"`).join(", ")}).`,
      );
    }
    declared.push({ methods, url: route.url, access });
  });
}

/** A route as registered: its methods, URL pattern and access policy. */
export interface DeclaredRoute {
  methods: string[];
  url: string;
  access: RouteAccess;
}

const routeLists = new WeakMap<FastifyInstance, DeclaredRoute[]>();

/** Every route registered on an app built with requireRouteAccess, in order (the fuzz suite walks them all). */
export function declaredRoutes(app: FastifyInstance): readonly DeclaredRoute[] {
  const routes = routeLists.get(app);
  if (routes === undefined) throw new Error("declaredRoutes: the app was not built with requireRouteAccess");
  return routes;
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
    // The playground's routes are guardPlayground's: a token gives nothing there, a cookie nothing here.
    // "monitor" routes are guardMonitoring's: the metrics token, not a personal access token.
    if (access === "public" || access === "session" || access === "sign-in" || access === "monitor") return;
    request.caller = await gate.authenticate(singleCredential(request));
    if (access === "operator") {
      throw new ServerError("forbidden", {
        message: `Tokens may not call ${request.method} ${request.routeOptions.url} on this server: the operator manages models with the modelhost CLI.`,
      });
    }
  });
}

/**
 * The caller's credential, as an Authorization value: the `Authorization` header, or the
 * `x-api-key` header that Anthropic's clients send (taken as `Bearer <key>`). Refused when a
 * header is sent more than once (Node keeps only the first of duplicates, and a proxy may read the
 * last, so two headers could authenticate as two different callers: the raw header list still has
 * every copy), and when both headers are sent with different tokens.
 */
function singleCredential(request: FastifyRequest): string | undefined {
  const raw = request.raw.rawHeaders;
  const counts = { authorization: 0, "x-api-key": 0 };
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]?.toLowerCase();
    if (name === "authorization" || name === "x-api-key") counts[name]++;
  }
  if (counts.authorization > 1 || counts["x-api-key"] > 1) {
    throw new ServerError("invalid_api_key", {
      message: `The request has more than one ${counts.authorization > 1 ? "Authorization" : "x-api-key"} header, which is ambiguous. Send exactly one credential.`,
    });
  }
  const { authorization } = request.headers;
  const apiKey = request.headers["x-api-key"];
  if (typeof apiKey !== "string") return authorization;
  const fromKey = `Bearer ${apiKey.trim()}`;
  // The same token in both (clients that set both from one variable) is one credential.
  if (authorization !== undefined && bearerToken(authorization) !== apiKey.trim()) {
    throw new ServerError("invalid_api_key", {
      message:
        "The request has both an Authorization and an x-api-key header with different credentials, which is ambiguous. Send exactly one.",
    });
  }
  return fromKey;
}

function bearerToken(authorization: string): string | undefined {
  return /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1];
}

/**
 * The engine as the hosted profile's routes see it: a chat, embeddings, rerank, tokenizer or
 * token-counting call without an admission (a route that forgot the caller's limits) is a bug, refused as an internal error
 * rather than served for free.
 */
export function requireAdmission(engine: Engine): Engine {
  const admitted = (options: RequestOptions): RequestOptions => {
    if (!options.admit)
      throw new ServerError("internal_error", { cause: new Error("Hosted profile: an engine call reached the engine without admission.") });
    return options;
  };
  return {
    listModels: () => engine.listModels(),
    findModel: (name) => engine.findModel(name),
    chat: async (request, options) => engine.chat(request, admitted(options)),
    chatChoices: async (request, options) => engine.chatChoices(request, admitted(options)),
    embed: async (request, options) => engine.embed(request, admitted(options)),
    countTokens: async (request, options) => engine.countTokens(request, admitted(options)),
    rerank: async (request, options) => engine.rerank(request, admitted(options)),
    tokenize: async (request, options) => engine.tokenize(request, admitted(options)),
    detokenize: async (request, options) => engine.detokenize(request, admitted(options)),
    // Loading, unloading and reading models consume no tokens: a caller's token is enough.
    load: (name, options) => engine.load(name, options),
    unload: (name) => engine.unload(name),
    describeModel: (name) => engine.describeModel(name),
    modelDigest: (model) => engine.modelDigest(model),
    status: () => engine.status(),
    close: () => engine.close(),
  };
}

/**
 * The door of "monitor" routes, in both profiles: with a metrics token set, only a request whose
 * single `Authorization: Bearer` header carries it (compared in constant time); else open.
 */
export function guardMonitoring(app: FastifyInstance, metricsToken: string): void {
  if (metricsToken === "") return;
  app.addHook("onRequest", async (request) => {
    if (request.routeOptions.config.access !== "monitor") return;
    const credential = singleCredential(request);
    const presented = credential === undefined ? undefined : bearerToken(credential);
    if (presented === undefined || !sameSecret(presented, metricsToken)) {
      throw new ServerError("invalid_api_key", {
        message: "GET /metrics needs the operator's metrics token: `Authorization: Bearer <--metrics-token>`.",
      });
    }
  });
}

/** What guardPlayground needs to know of the playground's sessions. */
export interface PlaygroundDoor {
  /**
   * The caller behind a request's session cookie (hosted profile), or `not_signed_in`. Absent in
   * the local profile, whose playground, like its API, checks no credentials.
   */
  authenticate?(request: FastifyRequest): Promise<Caller>;
  /** The CSRF tokens a state-changing request may carry in `x-csrf-token` (none: it can carry none). */
  csrfTokensOf(request: FastifyRequest): readonly string[];
}

/** The methods that change nothing: the only ones a cross-site page can make a browser send with its cookies unchecked. */
const SAFE_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * The browser playground's door, for routes of access "session" and "sign-in", in both profiles.
 * A session route in the hosted profile needs a valid session cookie; a token gives nothing.
 *
 * CSRF, on every state-changing request: the `x-csrf-token` header must equal a token the door
 * expects (derived from the session cookie, or before sign-in from the pre-session cookie; in the
 * local profile one token per process), and an `Origin` header, when the browser sends one, must
 * be the server's own origin. A page of another site can neither read that token (the same-origin
 * policy keeps the session response from it) nor send a custom header without a CORS preflight,
 * and the Origin check refuses it even where CORS lets it through (--cors-origins).
 */
export function guardPlayground(app: FastifyInstance, door: PlaygroundDoor): void {
  app.addHook("onRequest", async (request) => {
    const access = request.routeOptions.config.access;
    if (access !== "session" && access !== "sign-in") return;
    if (access === "session" && door.authenticate) request.caller = await door.authenticate(request);
    if (!SAFE_METHODS.has(request.method)) checkCsrf(request, door.csrfTokensOf(request));
  });
}

function checkCsrf(request: FastifyRequest, expected: readonly string[]): void {
  const origin = request.headers.origin;
  // The proxy's scheme and host (X-Forwarded-Proto, -Host) only when --trust-proxy trusts it.
  const own = ownOrigin(request);
  if (origin !== undefined && origin.toLowerCase() !== own.toLowerCase()) {
    throw new ServerError("csrf_rejected", { message: `The request comes from ${origin}, not from this server (${own}): refused.` });
  }
  const presented = request.headers["x-csrf-token"];
  if (typeof presented !== "string" || presented === "") {
    throw new ServerError("csrf_rejected", {
      message: "The request has no x-csrf-token header: send the csrf_token of GET /playground/api/session.",
    });
  }
  if (!expected.some((token) => sameSecret(presented, token))) {
    throw new ServerError("csrf_rejected", {
      message: "The x-csrf-token header does not match this session: read it again from GET /playground/api/session.",
    });
  }
}

/** Constant-time comparison of two secrets (their lengths may differ: a length is no secret). */
function sameSecret(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}
