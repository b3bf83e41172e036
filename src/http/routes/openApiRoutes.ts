import type { FastifyInstance } from "fastify";
import type { ApiDescription } from "../openapi.js";

/**
 * GET /openapi.json: the OpenAPI 3.1 description of every route, generated from the zod schemas
 * the routes validate with. A caller's route: in the hosted profile it needs a token, like the API.
 */
export function openApiRoutes(app: FastifyInstance, api: ApiDescription): void {
  // Routes are all registered before the first request: built once, on first use.
  let document: Record<string, unknown> | undefined;
  app.get(
    "/openapi.json",
    {
      config: {
        access: "caller",
        openapi: { summary: "This API description (OpenAPI 3.1), generated from the request schemas." },
      },
    },
    async () => (document ??= api.document()),
  );
}
