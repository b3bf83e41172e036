import type { FastifyInstance } from "fastify";
import type { ServerMetrics } from "../metrics.js";

/** GET /metrics: the Prometheus text format (see docs/operations.md for the metrics). */
export function metricsRoutes(app: FastifyInstance, metrics: ServerMetrics): void {
  app.get(
    "/metrics",
    {
      config: {
        access: "monitor",
        openapi: { summary: "Prometheus metrics (docs/operations.md)", produces: ["text/plain"] },
      },
    },
    async (_request, reply) => reply.type(metrics.registry.contentType).send(await metrics.text()),
  );
}
