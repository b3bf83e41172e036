import type { FastifyInstance, RouteOptions } from "fastify";

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

declare module "fastify" {
  interface FastifyContextConfig {
    /**
     * Required on every route (a route without it makes the server refuse to start): the policy
     * is the matched route's, never derived from the URL, so no spelling of a path can dodge it.
     */
    access?: RouteAccess;
  }
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
