import { createHash, randomBytes } from "node:crypto";
// The plugin (registered by buildApp) adds request.cookies, reply.setCookie and reply.clearCookie.
import type {} from "@fastify/cookie";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Caller } from "../access/AccessGate.js";
import type { NewSignIn, SignInService } from "../access/SignInService.js";
import { ServerError } from "../core/ServerError.js";
import type { PlaygroundDoor } from "./playgroundGuard.js";

/** The session cookie: its value is the session's secret, which the store knows only by its hash. */
const SESSION_COOKIE = "modelhost_session";
/**
 * Before sign-in, GET /playground/api/session sets this random cookie, and the CSRF token of the
 * sign-in request is derived from it: so a sign-in too needs a token only a page of this origin
 * can have read (no "login CSRF", where another site signs a browser in to an account of its own).
 */
const PRESESSION_COOKIE = "modelhost_presession";
/** The cookies go to the playground's URLs only, never to /v1 or /api (where they would give nothing anyway). */
const COOKIE_PATH = "/playground";
const PRESESSION_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/**
 * The CSRF token of a cookie's secret: SHA-256 of it under a label, so the page can be handed the
 * token (in a JSON body) without ever being handed the HttpOnly secret, and the server derives it
 * again from the cookie on each request instead of storing it. Knowing the token does not reveal
 * the secret, and the store's hash of the secret (unlabelled) is not the token.
 */
function csrfTokenFor(secret: string): string {
  return createHash("sha256").update("modelhost playground csrf\0").update(secret).digest("base64url");
}

/** The hosted profile's playground sessions as HTTP sees them: cookies in, callers and CSRF tokens out. */
export class PlaygroundSessions implements PlaygroundDoor {
  readonly signIn: SignInService;

  constructor(signIn: SignInService) {
    this.signIn = signIn;
  }

  async authenticate(request: FastifyRequest): Promise<Caller> {
    const found = await this.signIn.authenticate(request.cookies[SESSION_COOKIE]);
    if (!found) throw new ServerError("not_signed_in");
    return { account: found.account, token: null };
  }

  /** Either cookie's token: the session's, or before sign-in (or after it ended) the pre-session's. */
  csrfTokensOf(request: FastifyRequest): string[] {
    return [request.cookies[SESSION_COOKIE], request.cookies[PRESESSION_COOKIE]]
      .filter((secret) => secret !== undefined && secret !== "")
      .map((secret) => csrfTokenFor(secret!));
  }

  /** The signed-in account and its CSRF token, or undefined (and a stale session cookie is cleared). */
  async current(request: FastifyRequest, reply: FastifyReply): Promise<{ caller: Caller; csrfToken: string } | undefined> {
    const secret = request.cookies[SESSION_COOKIE];
    if (secret === undefined) return undefined;
    const found = await this.signIn.authenticate(secret);
    if (!found) {
      reply.clearCookie(SESSION_COOKIE, this.#cookieOptions(request));
      return undefined;
    }
    return { caller: { account: found.account, token: null }, csrfToken: csrfTokenFor(secret) };
  }

  /** The CSRF token for signing in, setting the pre-session cookie it comes from when there is none yet. */
  presessionToken(request: FastifyRequest, reply: FastifyReply): string {
    let secret = request.cookies[PRESESSION_COOKIE];
    if (secret === undefined || !PRESESSION_PATTERN.test(secret)) {
      secret = randomBytes(32).toString("base64url");
      // A browser-session cookie (no Max-Age): it only has to live until the sign-in.
      reply.setCookie(PRESESSION_COOKIE, secret, this.#cookieOptions(request));
    }
    return csrfTokenFor(secret);
  }

  /** Puts a new session in the cookie (and drops the pre-session one); returns its CSRF token. */
  startSession(request: FastifyRequest, reply: FastifyReply, signIn: NewSignIn): string {
    reply.setCookie(SESSION_COOKIE, signIn.secret, { ...this.#cookieOptions(request), maxAge: Math.floor(this.signIn.maxAgeMs / 1000) });
    reply.clearCookie(PRESESSION_COOKIE, this.#cookieOptions(request));
    return csrfTokenFor(signIn.secret);
  }

  /** Ends the request's session in the store (for every replica) and in the browser. */
  async endSession(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const secret = request.cookies[SESSION_COOKIE];
    if (secret !== undefined) await this.signIn.signOut(secret);
    reply.clearCookie(SESSION_COOKIE, this.#cookieOptions(request));
  }

  /**
   * HttpOnly (no script reads it, so a script injected into the page cannot steal the session),
   * SameSite=Lax (not sent on other sites' subrequests and POSTs), Secure when the request came
   * over https: directly, or through a proxy --trust-proxy trusts (X-Forwarded-Proto). Over plain
   * http (the loopback, a test) a Secure cookie would never be sent back.
   */
  #cookieOptions(request: FastifyRequest) {
    return { path: COOKIE_PATH, httpOnly: true, sameSite: "lax" as const, secure: request.protocol === "https" };
  }
}
