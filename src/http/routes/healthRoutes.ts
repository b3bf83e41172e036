import type { FastifyInstance } from "fastify";
import type { Engine } from "../../core/Engine.js";

export function healthRoutes(app: FastifyInstance, { engine }: { engine: Engine }): void {
  // Clients of the local runtime probe the root path for liveness.
  app.get("/", { config: { access: "public" } }, async (_request, reply) => reply.type("text/plain; charset=utf-8").send("modelhost is running"));

  app.get("/health", { config: { access: "public" } }, async (_request, reply) => {
    const status = engine.status();
    return reply.status(status.ready ? 200 : 503).send({ status: status.ready ? "ok" : "unavailable", ...status });
  });
}
