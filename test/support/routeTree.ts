import type { FastifyInstance } from "fastify";
import { declaredRoutes } from "../../src/http/routeAccess.js";

/** A route as registered: one method and its URL pattern. */
export interface Route {
  method: string;
  path: string;
}

/**
 * Every route of the app, one per method (HEAD left out: Fastify adds it beside each GET), from the
 * registry the default-deny hook keeps, so a route added later is covered too.
 */
export function routesOf(app: FastifyInstance): Route[] {
  return declaredRoutes(app).flatMap((route) =>
    route.methods.filter((method) => method !== "HEAD").map((method) => ({ method, path: route.url })),
  );
}
