import type { FastifyInstance } from "fastify";
import type { Engine } from "../../core/Engine.js";
import type { Drain } from "../Drain.js";

export function healthRoutes(app: FastifyInstance, { engine, drain }: { engine: Engine; drain: Drain }): void {
  // Clients of the local runtime probe the root path for liveness, some matching this exact text
  // (the reference server's), so it is that text; GET /health says what this server is.
  app.get("/", { config: { access: "public", openapi: { summary: "Liveness: the text local-runtime clients probe for", produces: ["text/plain"] } } }, async (_request, reply) => reply.type("text/plain; charset=utf-8").send("Ollama is running"));

  // Not ready (503) from the first moment of a graceful shutdown, so a load balancer stops sending
  // work here while the requests in flight finish: `status: "draining"`, `ready: false`.
  app.get("/health", { config: { access: "public", openapi: { summary: "Readiness and the loaded models; 503 when not ready or draining" } } }, async (_request, reply) => {
    const status = engine.status();
    if (drain.draining) return reply.status(503).send({ ...status, status: "draining", ready: false });
    return reply.status(status.ready ? 200 : 503).send({ status: status.ready ? "ok" : "unavailable", ...status });
  });
}
