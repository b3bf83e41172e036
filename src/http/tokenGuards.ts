import type { FastifyInstance } from "fastify";
import type { AccessGate, Caller } from "../access/AccessGate.js";
import { ServerError } from "../core/ServerError.js";
import { bearerToken, sameSecret, singleCredential } from "./credentials.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The authenticated caller, in the hosted profile (or the playground's signed-in account). */
    caller?: Caller;
  }
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
