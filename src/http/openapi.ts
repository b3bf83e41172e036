import type { FastifyInstance, RouteOptions } from "fastify";
import { z } from "zod";
import { errorShapeOf, type ErrorShape } from "./errorShapes.js";

/**
 * What a route tells the API description (GET /openapi.json) about itself. Required on every route,
 * like `config.access`: a route without it makes the server refuse to start, so no route can be
 * added and forgotten there.
 */
export interface RouteDoc {
  /** One line: what the route does. */
  summary: string;
  /** The zod schema the handler checks its JSON body with: the same object, so the two cannot drift. */
  body?: z.ZodType;
  /** The zod schema of the query string, likewise. */
  query?: z.ZodType;
  /** The body of a successful answer, when it is JSON. */
  response?: z.ZodType;
  /** The status of a successful answer when it is not 200: 201 (created), 204 (no content). */
  status?: 201 | 204;
  /**
   * Other media types a successful answer may have: "text/event-stream" (each event's data is
   * `streamEvent`), "application/x-ndjson" (each line is `streamEvent`), "text/plain", "text/html"…
   */
  produces?: string[];
  /** The shape of one event of a stream (text/event-stream data, or one NDJSON line). */
  streamEvent?: z.ZodType;
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** Required on every route: its entry in GET /openapi.json (see RouteDoc). */
    openapi?: RouteDoc;
  }
}

/** The methods an OpenAPI path item can describe (a catch-all route's others are left out). */
const DESCRIBABLE = new Set(["GET", "PUT", "POST", "DELETE", "OPTIONS", "PATCH", "TRACE"]);

interface DescribedRoute {
  method: string;
  url: string;
  doc: RouteDoc;
  access: string;
  errorShape: ErrorShape;
}

/** Fastify's `/v1/models/*` and `/api/blobs/:digest` as OpenAPI paths (`{model}`, `{digest}`). */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, "{$1}").replace(/\*$/, "{path}");
}

const jsonSchemaOf = (schema: z.ZodType, io: "input" | "output") =>
  // Transforms and refinements describe nothing JSON Schema can say: the input shape is what a client sends.
  z.toJSONSchema(schema, { io, unrepresentable: "any", target: "draft-2020-12" }) as Record<string, unknown>;

/**
 * The OpenAPI 3.1 description of an app, from the routes as they are registered: each route's
 * `config.openapi`, its access policy (security) and its protocol's error shape.
 */
export class ApiDescription {
  readonly #routes: DescribedRoute[] = [];
  readonly #errorSchemas = new Map<ErrorShape, { name: string; schema: z.ZodType }>();
  readonly #info: { title: string; version: string };

  constructor(info: { title: string; version: string }) {
    this.#info = info;
  }

  /** Names the body a protocol's errors have, so its routes' error responses are described. */
  describeErrors(shape: ErrorShape, name: string, schema: z.ZodType): void {
    this.#errorSchemas.set(shape, { name, schema });
  }

  /** Collects every route as it is registered, refusing one without `config.openapi`; install before any route. */
  install(app: FastifyInstance): void {
    const routes = this.#routes;
    // `this` is the instance the route is registered on: its protocol scope gives the error shape.
    app.addHook("onRoute", function (this: FastifyInstance, route: RouteOptions) {
      const methods = (Array.isArray(route.method) ? route.method : [route.method]).filter((method) => method !== "HEAD");
      // @fastify/cors's preflight route (`OPTIONS *`) and Fastify's HEAD twins of GET routes describe nothing of their own.
      if (methods.length === 0 || (route.url === "*" && methods.every((method) => method === "OPTIONS"))) return;
      const doc = route.config?.openapi;
      if (!doc || typeof doc.summary !== "string" || doc.summary === "") {
        throw new Error(
          `Route ${methods.join(",")} ${route.url} has no config.openapi: declare { summary, body?, query?, response? } with the zod schemas its handler uses (src/http/openapi.ts), so GET /openapi.json describes it.`,
        );
      }
      for (const method of methods.filter((method) => DESCRIBABLE.has(method))) {
        routes.push({ method, url: route.url, doc, access: route.config?.access ?? "public", errorShape: errorShapeOf(this) });
      }
    });
  }

  /** Every described route, as `METHOD path` with OpenAPI paths. */
  operations(): string[] {
    return this.#routes.map((route) => `${route.method} ${openApiPath(route.url)}`);
  }

  document(): Record<string, unknown> {
    const components: Record<string, unknown> = {};
    const ref = (name: string, schema: z.ZodType, io: "input" | "output") => {
      components[name] ??= jsonSchemaOf(schema, io);
      return { $ref: `#/components/schemas/${name}` };
    };
    const paths: Record<string, Record<string, unknown>> = {};
    for (const route of this.#routes) {
      const { doc } = route;
      const path = openApiPath(route.url);
      const operation: Record<string, unknown> = { summary: doc.summary, operationId: `${route.method.toLowerCase()} ${path}` };
      const parameters = [...path.matchAll(/\{([A-Za-z0-9_]+)\}/g)].map((match) => ({
        name: match[1],
        in: "path",
        required: true,
        schema: { type: "string" },
      }));
      if (doc.query) {
        const query = jsonSchemaOf(doc.query, "input") as { properties?: Record<string, unknown>; required?: string[] };
        for (const [name, schema] of Object.entries(query.properties ?? {})) {
          parameters.push({ name, in: "query", required: query.required?.includes(name) ?? false, schema: schema as { type: string } });
        }
      }
      if (parameters.length > 0) operation.parameters = parameters;
      if (doc.body)
        operation.requestBody = { required: true, content: { "application/json": { schema: jsonSchemaOf(doc.body, "input") } } };

      const success: Record<string, unknown> = {};
      if (doc.response) success["application/json"] = { schema: ref(schemaName(route), doc.response, "output") };
      for (const type of doc.produces ?? []) {
        success[type] = doc.streamEvent ? { schema: ref(`${schemaName(route)}Event`, doc.streamEvent, "output") } : {};
      }
      const responses: Record<string, unknown> = {
        [doc.status ?? 200]: { description: doc.summary, ...(Object.keys(success).length > 0 ? { content: success } : {}) },
      };
      const errors = this.#errorSchemas.get(route.errorShape);
      responses.default = {
        description: "An error, in the route's protocol's shape (docs/errors.md).",
        ...(errors ? { content: { "application/json": { schema: ref(errors.name, errors.schema, "output") } } } : {}),
      };
      operation.responses = responses;
      if (route.access === "caller") operation.security = [{ bearer: [] }];
      if (route.access === "monitor") operation.security = [{ metricsToken: [] }, {}];
      operation["x-access"] = route.access;
      (paths[path] ??= {})[route.method.toLowerCase()] = operation;
    }
    return {
      openapi: "3.1.0",
      info: {
        ...this.#info,
        description:
          "modelhost: OpenAI-compatible, Anthropic Messages, Ollama-native and llama-server APIs. Generated from the zod schemas the server validates requests with.",
      },
      paths,
      components: {
        schemas: components,
        securitySchemes: {
          bearer: {
            type: "http",
            scheme: "bearer",
            description: "Hosted profile: a personal access token. The local profile checks none.",
          },
          metricsToken: { type: "http", scheme: "bearer", description: "The operator's --metrics-token." },
        },
      },
    };
  }
}

/** A component name for a route's schema: the route's method and path in PascalCase. */
function schemaName(route: { method: string; url: string }): string {
  // `/v1/models/*` → GetV1ModelsPath, `/v1/responses/:id` → GetV1ResponsesId (distinct from their parents).
  return `${route.method[0]}${route.method.slice(1).toLowerCase()}${openApiPath(route.url)
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join("")}`;
}

/** A route's config with its API description: `{ config: described(config, { summary, body }) }`. */
export function described<C extends object>(config: C, openapi: RouteDoc): C & { openapi: RouteDoc } {
  return { ...config, openapi };
}
