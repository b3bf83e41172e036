import type { FastifyInstance } from "fastify";
import type { Engine } from "../../core/Engine.js";

export function healthRoutes(app: FastifyInstance, { engine }: { engine: Engine }): void {
  // Clients of the local runtime probe the root path for liveness, some matching this exact text
  // (the reference server's), so it is that text; GET /health says what this server is.
  app.get("/", { config: { access: "public" } }, async (_request, reply) => reply.type("text/plain; charset=utf-8").send("Ollama is running"));

  app.get("/health", { config: { access: "public" } }, async (_request, reply) => {
    const status = engine.status();
    return reply.status(status.ready ? 200 : 503).send({ status: status.ready ? "ok" : "unavailable", ...status });
  });
}
