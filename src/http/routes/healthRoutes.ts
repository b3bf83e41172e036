import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Engine } from "../../core/Engine.js";
import { KV_CACHE_TYPES } from "../../core/KvCacheType.js";
import type { Drain } from "../Drain.js";
import { described } from "../openapi.js";

/** GET /health: the engine's status (EngineStatus) as JSON, with a status word. */
const healthResponseSchema = z.object({
  status: z.enum(["ok", "unavailable", "draining"]),
  ready: z.boolean(),
  backend: z.string().nullable(),
  loaded: z.array(
    z.object({
      id: z.string(),
      active: z.int(),
      queued: z.int(),
      expiresAt: z.number().nullable(),
      // A model kept loaded for ever has Infinity, which JSON writes as null.
      keepAliveMs: z.number().nullable(),
      contextSize: z.int(),
      loadMs: z.number(),
      kvCache: z
        .object({ typeK: z.enum(KV_CACHE_TYPES), typeV: z.enum(KV_CACHE_TYPES), contextBytes: z.int() })
        .optional()
        .describe(
          "The chat context: its KV cache types (--cache-type-k, --cache-type-v) and the bytes llama.cpp allocated for it (KV cache and compute buffers)",
        ),
    }),
  ),
  counters: z.object({
    promptEvaluations: z.int(),
    promptTokensEvaluated: z.int(),
    promptCopies: z.int(),
    promptTokensRestored: z.int(),
    draftTokens: z.int(),
    draftTokensAccepted: z.int(),
  }),
  promptCacheBytes: z.int(),
});

export function healthRoutes(app: FastifyInstance, { engine, drain }: { engine: Engine; drain: Drain }): void {
  // Clients of the local runtime probe the root path for liveness, some matching this exact text
  // (the reference server's), so it is that text; GET /health says what this server is.
  app.get(
    "/",
    { config: { access: "public", openapi: { summary: "Liveness: the text local-runtime clients probe for", produces: ["text/plain"] } } },
    async (_request, reply) => reply.type("text/plain; charset=utf-8").send("Ollama is running"),
  );

  // Not ready (503) from the first moment of a graceful shutdown, so a load balancer stops sending
  // work here while the requests in flight finish: `status: "draining"`, `ready: false`.
  app.get(
    "/health",
    {
      config: described(
        { access: "public" as const },
        { summary: "Readiness and the loaded models; 503 (same body) when not ready or draining", response: healthResponseSchema },
      ),
    },
    async (_request, reply) => {
      const status = engine.status();
      if (drain.draining) return reply.status(503).send({ ...status, status: "draining", ready: false });
      return reply.status(status.ready ? 200 : 503).send({ status: status.ready ? "ok" : "unavailable", ...status });
    },
  );
}
