import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { ModelStore, PullProgress } from "../../core/ModelStore.js";
import { fromPullRequest } from "../../protocols/ollama/fromNativeRequest.js";
import { ollamaErrorSchema } from "../../protocols/ollama/responseSchemas.js";
import { toOllamaError } from "../../protocols/ollama/toOllamaError.js";
import { abortSignalOf } from "../abortSignalOf.js";
import { NdjsonWriter } from "../NdjsonWriter.js";
import { toServerError } from "../toServerError.js";
import { described } from "../openapi.js";
import { pullRequestSchema } from "../../protocols/ollama/schemas.js";
import { same, type Same } from "../../protocols/sameShape.js";

/** One line of the progress stream: a step (`pulling manifest`, `pulling <digest>` with byte counts, …, `success`). */
const pullProgressSchema = z.object({
  status: z.string(),
  digest: z.string().optional(),
  total: z.int().optional(),
  completed: z.int().optional(),
});
same<Same<z.infer<typeof pullProgressSchema>, PullProgress>>(true);

/** A line of the stream: progress, or the error a pull that failed after the stream started ends with. */
const pullStreamLineSchema = z.union([pullProgressSchema, ollamaErrorSchema]);

/** With `stream: false`, the one object a pull that succeeded answers with. */
const pullResponseSchema = z.object({ status: z.literal("success") });

/**
 * `POST /api/pull`, the same pull as `modelhost pull`, with Ollama's progress stream: NDJSON
 * `{status, digest, total, completed}` lines ending with `{"status":"success"}` (one object with
 * `stream: false`). Refused to the hosted profile's tokens, like all model management.
 */
export function modelManagementRoutes(app: FastifyInstance, { models }: { models: ModelStore }): void {
  const config = { access: "operator" as const };

  app.post(
    "/pull",
    {
      config: described(config, {
        summary: "Pulls a model, streaming progress as NDJSON",
        body: pullRequestSchema,
        response: pullResponseSchema,
        produces: ["application/x-ndjson"],
        streamEvent: pullStreamLineSchema,
      }),
    },
    async (request, reply) => {
      const { model, stream } = fromPullRequest(request.body);
      // A client that goes away cancels the pull; what was downloaded stays, and the next pull resumes it.
      const signal = abortSignalOf(reply);
      if (!stream) {
        await models.pull(model, { signal });
        return { status: "success" };
      }

      const ndjson = new NdjsonWriter(reply);
      // "pulling manifest" is held back until the files are known, so that an unknown repository or
      // quantization is still an error with its own status (404, 400) rather than a line in a 200.
      let held: PullProgress | undefined;
      let started = false;
      let written: Promise<unknown> = Promise.resolve();
      const send = (progress: PullProgress) => {
        written = written.then(() => ndjson.send(progress));
      };
      const onProgress = (progress: PullProgress) => {
        if (!started) {
          if (progress.status === "pulling manifest") {
            held = progress;
            return;
          }
          ndjson.start();
          started = true;
          if (held) send(held);
        }
        send(progress);
      };
      try {
        await models.pull(model, { signal, onProgress });
        await written;
      } catch (error) {
        await written;
        if (!started) throw error;
        const serverError = toServerError(error);
        request.log.warn({ err: error, model }, `pull failed: ${serverError.message}`);
        await ndjson.send(toOllamaError(serverError));
      }
      ndjson.end();
    },
  );
}
