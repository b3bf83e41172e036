import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Caller } from "../access/AccessGate.js";
import { ServerError } from "../core/ServerError.js";
import { ownOrigin } from "./browserGuard.js";
import { sameSecret } from "./credentials.js";

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
