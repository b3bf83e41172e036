import { existsSync } from "node:fs";
import path from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { AccessError } from "../../access/AccessError.js";
import type { AccessGate, Caller } from "../../access/AccessGate.js";
import type { AccessService } from "../../access/AccessService.js";
import type { AccessToken, Account } from "../../access/AccessStore.js";
import type { Engine } from "../../core/Engine.js";
import { ServerError } from "../../core/ServerError.js";
import { modelListSchema } from "../../protocols/openai/responseSchemas.js";
import { same, type Same } from "../../protocols/sameShape.js";
import { toInvalidRequestError } from "../../protocols/toInvalidRequestError.js";
import { described } from "../openapi.js";
import type { PlaygroundSessions } from "../playgroundSessions.js";
import { chatCompletionsDoc, chatCompletionsHandler, listModelsHandler } from "./openaiRoutes.js";
import { usageHandler, usageQuerySchema, usageResponseSchema } from "./usageRoutes.js";

/** The built page (`npm run build` runs Vite on web/ into web/dist); the same path from src/http/routes and dist/http/routes. */
export const DEFAULT_PLAYGROUND_DIR = path.resolve(import.meta.dirname, "../../../web/dist");

/**
 * Vite names every file under assets/ by a hash of its content, so a changed file gets a new URL:
 * they may be cached for a year without ever being stale. index.html (and the other unhashed
 * files) must be revalidated, or a browser would keep loading an old page's old assets.
 */
const HASHED_ASSET_CACHE = "public, max-age=31536000, immutable";
const REVALIDATE = "no-cache";

export interface PlaygroundRouteOptions {
  engine: Engine;
  /** The built page's directory (index.html, assets/). */
  playgroundDir: string;
  /** Local profile: the one CSRF token of this process (see guardPlayground). */
  localCsrfToken: string;
  /** Hosted profile: the gate of the API, the accounts' tokens, and the sessions. */
  hosted?: { gate: AccessGate; accounts: AccessService; sessions: PlaygroundSessions };
}

const session = { access: "session" as const };
const signIn = { access: "sign-in" as const };

const signInBody = z.object({ account: z.string().min(1).max(256), password: z.string().min(1).max(4096) });
const newTokenBody = z.object({
  name: z.string().trim().min(1).max(100),
  /** Seconds since the epoch, or null: never expires. */
  expires_at: z
    .number()
    .int()
    .positive()
    .max(Number.MAX_SAFE_INTEGER / 1000)
    .nullable(),
});

// The playground API's replies, for the OpenAPI description (GET /openapi.json).
const accountSchema = z.object({ name: z.string(), tier: z.string() });
/** Local profile: anyone is signed in; the CSRF token is the process's. */
const localSessionSchema = z.object({ profile: z.literal("local"), signed_in: z.literal(true), csrf_token: z.string() });
/** Hosted profile: the session's account and CSRF token, or (not signed in) the pre-session's CSRF token for signing in. */
const hostedSessionSchema = z.union([
  z.object({ profile: z.literal("hosted"), signed_in: z.literal(true), account: accountSchema, csrf_token: z.string() }),
  z.object({ profile: z.literal("hosted"), signed_in: z.literal(false), csrf_token: z.string() }),
]);
const signedInSchema = z.object({ account: accountSchema, csrf_token: z.string() });
/** A token as the API lists it (tokenJson): times in seconds since the epoch, null for never. */
const tokenSchema = z.object({
  id: z.string(),
  name: z.string(),
  prefix: z.string(),
  created_at: z.int(),
  last_used_at: z.int().nullable(),
  expires_at: z.int().nullable(),
  revoked_at: z.int().nullable(),
});
const tokenListSchema = z.object({ data: z.array(tokenSchema) });
/** A new token: its secret, shown this once, and the token as listed. */
const createdTokenSchema = tokenSchema.extend({ token: z.string() });

/**
 * The browser playground: its static page under /playground, and its API under /playground/api,
 * which reuses the OpenAI routes' handlers (same bodies, streaming, limits, ledger and disconnect
 * handling) behind the playground's own door (playgroundGuard.ts).
 */
export async function playgroundRoutes(app: FastifyInstance, options: PlaygroundRouteOptions): Promise<void> {
  const { engine, hosted } = options;
  await staticRoutes(app, options.playgroundDir);

  app.get(
    "/playground/api/models",
    { config: described(session, { summary: "Playground: the models (as GET /v1/models)", response: modelListSchema }) },
    listModelsHandler(engine),
  );
  app.post(
    "/playground/api/chat/completions",
    { config: described(session, { ...chatCompletionsDoc, summary: "Playground: chat completion (as POST /v1/chat/completions)" }) },
    chatCompletionsHandler(engine, hosted?.gate),
  );

  if (!hosted) {
    app.get(
      "/playground/api/session",
      { config: described(signIn, { summary: "Playground: who is signed in, and the CSRF token", response: localSessionSchema }) },
      async () => ({ profile: "local", signed_in: true, csrf_token: options.localCsrfToken }),
    );
    // Accounts, tokens and usage exist only in the hosted profile.
    const hostedOnly = async () => {
      throw new ServerError("not_found", {
        message:
          "Tokens, usage and sign-in belong to the hosted profile (--profile hosted); this server runs the local profile, which has no accounts.",
      });
    };
    app.get(
      "/playground/api/tokens",
      { config: described(session, { summary: "Playground: the account's tokens (hosted profile)" }) },
      hostedOnly,
    );
    app.post(
      "/playground/api/tokens",
      { config: described(session, { summary: "Playground: a new token (hosted profile)", body: newTokenBody }) },
      hostedOnly,
    );
    app.delete(
      "/playground/api/tokens/:id",
      { config: described(session, { summary: "Playground: revokes a token (hosted profile)" }) },
      hostedOnly,
    );
    app.get(
      "/playground/api/usage",
      { config: described(session, { summary: "Playground: the account's usage (hosted profile)", query: usageQuerySchema }) },
      hostedOnly,
    );
    app.post(
      "/playground/api/sign-in",
      { config: described(signIn, { summary: "Playground: signs in (hosted profile)", body: signInBody }) },
      hostedOnly,
    );
    app.post("/playground/api/sign-out", { config: described(signIn, { summary: "Playground: signs out (hosted profile)" }) }, hostedOnly);
    app.get(
      "/playground/sign-in",
      { config: described(signIn, { summary: "Playground: the sign-in page", produces: ["text/html"] }) },
      async (_request, reply) =>
        textPage(reply, 404, "This server runs the local profile: there is nothing to sign in to. Open /playground/."),
    );
  } else {
    hostedRoutes(app, hosted);
  }

  // Any other URL under the API is an API 404 (JSON), not the page.
  app.all("/playground/api/*", { config: described(signIn, { summary: "Playground: unknown API paths (404)" }) }, async (request) => {
    throw new ServerError("not_found", { message: `Unknown request URL: ${request.method} ${request.url}.` });
  });
}

function hostedRoutes(app: FastifyInstance, { gate, accounts, sessions }: NonNullable<PlaygroundRouteOptions["hosted"]>): void {
  const accountJson = (account: Account) => ({ name: account.name, tier: account.tier });

  app.get(
    "/playground/api/session",
    { config: described(signIn, { summary: "Playground: who is signed in, and the CSRF token", response: hostedSessionSchema }) },
    async (request, reply) => {
      const current = await sessions.current(request, reply);
      if (current)
        return { profile: "hosted", signed_in: true, account: accountJson(current.caller.account), csrf_token: current.csrfToken };
      return { profile: "hosted", signed_in: false, csrf_token: sessions.presessionToken(request, reply) };
    },
  );

  app.post(
    "/playground/api/sign-in",
    { config: described(signIn, { summary: "Playground: signs in (hosted profile)", body: signInBody, response: signedInSchema }) },
    async (request, reply) => {
      const { account, password } = parse(signInBody, request.body);
      const opened = await sessions.signIn.signIn(account, password, request.ip);
      const csrfToken = sessions.startSession(request, reply, opened);
      return { account: accountJson(opened.account), csrf_token: csrfToken };
    },
  );

  // A link from `modelhost account sign-in-link`, opened in the browser: a page, not an API call.
  app.get(
    "/playground/sign-in",
    { config: described(signIn, { summary: "Playground: the sign-in page", produces: ["text/html"] }) },
    async (request, reply) => {
      const link = (request.query as { link?: unknown }).link;
      if (typeof link !== "string" || link === "")
        return textPage(reply, 400, "This address needs ?link=… : open the whole link that `modelhost account sign-in-link` printed.");
      try {
        sessions.startSession(request, reply, await sessions.signIn.signInWithLink(link));
      } catch (error) {
        if (error instanceof ServerError && error.code === "sign_in_failed")
          return textPage(
            reply,
            401,
            `${error.message}\n\nSign in at /playground/ with your password, or ask the operator for a new link.`,
          );
        throw error;
      }
      // The link carries a secret: send no Referer with it onward, and keep it out of caches.
      return reply.header("referrer-policy", "no-referrer").header("cache-control", "no-store").redirect("/playground/", 303);
    },
  );

  app.post(
    "/playground/api/sign-out",
    { config: described(signIn, { summary: "Playground: signs out (hosted profile)", status: 204 }) },
    async (request, reply) => {
      await sessions.endSession(request, reply);
      return reply.status(204).send();
    },
  );

  app.get(
    "/playground/api/tokens",
    { config: described(session, { summary: "Playground: the account's tokens (hosted profile)", response: tokenListSchema }) },
    async (request) => {
      const tokens = await accounts.listTokens(callerOf(request).account.id);
      return { data: tokens.map(tokenJson) };
    },
  );

  app.post(
    "/playground/api/tokens",
    {
      config: described(session, {
        summary: "Playground: a new token (hosted profile)",
        body: newTokenBody,
        response: createdTokenSchema,
        status: 201,
      }),
    },
    async (request, reply) => {
      const body = parse(newTokenBody, request.body);
      const expiresAt = body.expires_at === null ? null : body.expires_at * 1000;
      try {
        const { secret, token } = await accounts.createToken(callerOf(request).account.id, { name: body.name, expiresAt });
        return reply.status(201).send({ token: secret, ...tokenJson(token) });
      } catch (error) {
        if (error instanceof AccessError && error.code === "expiry_invalid")
          throw new ServerError("invalid_request", { param: "expires_at", message: error.message });
        throw error;
      }
    },
  );

  app.delete(
    "/playground/api/tokens/:id",
    { config: described(session, { summary: "Playground: revokes a token (hosted profile)", response: tokenSchema }) },
    async (request) => {
      const { id } = request.params as { id: string };
      // Only the account's own tokens, and only by id: another account's id is as unknown as a made-up one.
      const own = await accounts.listTokens(callerOf(request).account.id);
      if (!own.some((token) => token.id === id))
        throw new ServerError("not_found", { message: `Your account has no token ${JSON.stringify(id)}.` });
      return tokenJson(await accounts.revokeToken(id));
    },
  );

  app.get(
    "/playground/api/usage",
    {
      config: described(session, {
        summary: "Playground: the account's usage (hosted profile)",
        query: usageQuerySchema,
        response: usageResponseSchema,
      }),
    },
    usageHandler(gate),
  );
}

/** A token as the playground's API lists it: times in seconds since the epoch, as OpenAI's `created`. */
function tokenJson(token: AccessToken) {
  const seconds = (ms: number) => Math.floor(ms / 1000);
  const secondsOrNull = (ms: number | null) => (ms === null ? null : seconds(ms));
  return {
    id: token.id,
    name: token.name,
    prefix: token.prefix,
    created_at: seconds(token.createdAt),
    last_used_at: secondsOrNull(token.lastUsedAt),
    expires_at: secondsOrNull(token.expiresAt),
    revoked_at: secondsOrNull(token.revokedAt),
  };
}

same<Same<z.infer<typeof tokenSchema>, ReturnType<typeof tokenJson>>>(true);

/** The signed-in caller: guardPlayground sets it on every "session" route of the hosted profile. */
function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw new ServerError("not_signed_in");
  return request.caller;
}

function parse<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw toInvalidRequestError(parsed.error, body);
  return parsed.data;
}

function textPage(reply: FastifyReply, status: number, text: string): FastifyReply {
  return reply.status(status).type("text/plain; charset=utf-8").header("cache-control", "no-store").send(`${text}\n`);
}

/**
 * The page: index.html for /playground and for every page route under it (the page routes by
 * itself), and the files Vite built. When the page was never built, a 503 that says how to build it.
 */
async function staticRoutes(app: FastifyInstance, dir: string): Promise<void> {
  const config = { access: "public" as const };
  const built = () => existsSync(path.join(dir, "index.html"));
  // serve: false: the plugin registers no routes of its own (they could not declare their access
  // policy); it only gives reply.sendFile, which refuses paths that leave `dir`.
  await app.register(fastifyStatic, { root: dir, serve: false, suppressWarning: true });

  const page = (reply: FastifyReply) => {
    if (!built()) return notBuilt(reply);
    return reply.sendFile("index.html", dir, { cacheControl: false }).header("cache-control", REVALIDATE);
  };
  app.get(
    "/playground",
    { config: described(config, { summary: "The playground page", produces: ["text/html"] }) },
    async (_request, reply) => page(reply),
  );
  app.get(
    "/playground/*",
    { config: described(config, { summary: "The playground's files (the page for unknown paths)", produces: ["text/html"] }) },
    async (request, reply) => {
      const file = (request.params as { "*": string })["*"];
      if (!built()) return notBuilt(reply);
      if (file === "" || !existsSync(path.join(dir, path.normalize(`/${file}`)))) return page(reply);
      const hashed = file.startsWith("assets/");
      return reply.sendFile(file, dir, { cacheControl: false }).header("cache-control", hashed ? HASHED_ASSET_CACHE : REVALIDATE);
    },
  );
}

function notBuilt(reply: FastifyReply): FastifyReply {
  return textPage(
    reply,
    503,
    "The playground page is not built. Run `npm run build` (it builds web/ into web/dist), then reload this page.",
  );
}
