import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AccessGate } from "../../access/AccessGate.js";
import type { Engine } from "../../core/Engine.js";
import type { ModelStore } from "../../core/ModelStore.js";
import { assertModelName } from "../../core/modelName.js";
import { ServerError } from "../../core/ServerError.js";
import {
  fromChatRequest,
  fromCopyRequest,
  fromEmbedRequest,
  fromGenerateRequest,
  fromLegacyEmbeddingsRequest,
  fromModelRequest,
  type NativeGeneration,
} from "../../protocols/ollama/fromNativeRequest.js";
import { API_VERSION, toEmbedResponse, toListedModels, toRunningModel, toShowResponse } from "../../protocols/ollama/toModelResponses.js";
import { toNativeReply } from "../../protocols/ollama/toNativeReply.js";
import { NativeReplyStream, type ReplyKind } from "../../protocols/ollama/NativeReplyStream.js";
import { NdjsonWriter } from "../NdjsonWriter.js";
import { engineOptions } from "../engineOptions.js";
import { translated } from "../translated.js";
import { pumpStream } from "../pumpStream.js";
import { described } from "../openapi.js";
import {
  embedResponseSchema,
  legacyEmbeddingsResponseSchema,
  nativeChatResponseSchema,
  nativeChatStreamLineSchema,
  nativeGenerateResponseSchema,
  nativeGenerateStreamLineSchema,
  psResponseSchema,
  showResponseSchema,
  tagsResponseSchema,
  versionResponseSchema,
} from "../../protocols/ollama/responseSchemas.js";
import {
  chatRequestSchema,
  copyRequestSchema,
  embedRequestSchema,
  generateRequestSchema,
  legacyEmbeddingsRequestSchema,
  modelRequestSchema,
} from "../../protocols/ollama/schemas.js";

export interface OllamaRouteOptions {
  engine: Engine;
  access?: AccessGate;
  /** Where copy and delete change the installed models. */
  models: ModelStore;
}

/**
 * The native API of local runtimes (Ollama's), under /api: generation (chat, generate, embed),
 * the model listing and inspection endpoints, and aliases (copy) and deletion. The translation is
 * in protocols/ollama; here are only HTTP and the calls to the engine and the model store.
 */
export function ollamaRoutes(app: FastifyInstance, { engine, access, models }: OllamaRouteOptions): void {
  const config = { access: "caller" as const };

  /** Model management is the operator's, through the CLI: refused to the hosted profile's tokens. */
  const management = { access: "operator" as const };

  /**
   * A request's keep_alive, honoured locally. In the hosted profile residency is the operator's
   * (--keep-alive): a token could otherwise pin models forever or unload those others are using.
   */
  const keepAliveOf = (requested: number | undefined) => (access ? undefined : requested);

  app.get("/version", { config: described(config, { summary: "The native API version", response: versionResponseSchema }) }, async () => ({
    version: API_VERSION,
  }));

  app.post(
    "/chat",
    {
      config: described(config, {
        summary: "Native chat: NDJSON stream by default, one object with stream: false",
        body: chatRequestSchema,
        response: nativeChatResponseSchema,
        produces: ["application/x-ndjson"],
        streamEvent: nativeChatStreamLineSchema,
      }),
    },
    async (request, reply) => generate("chat", await translated(engine, request.body, fromChatRequest), request, reply),
  );
  app.post(
    "/generate",
    {
      config: described(config, {
        summary: "Native completion of a prompt (templated, raw, or fill-in-the-middle)",
        body: generateRequestSchema,
        response: nativeGenerateResponseSchema,
        produces: ["application/x-ndjson"],
        streamEvent: nativeGenerateStreamLineSchema,
      }),
    },
    async (request, reply) => generate("generate", await translated(engine, request.body, fromGenerateRequest), request, reply),
  );

  /** Runs a chat or generate request and answers with one object, or streams them as NDJSON. */
  async function generate(kind: ReplyKind, generation: NativeGeneration, request: FastifyRequest, reply: FastifyReply) {
    const started = performance.now();
    const { chat, stream } = generation;
    const keepAliveMs = keepAliveOf(generation.keepAliveMs);
    const context = { kind, model: chat.model, elapsedMs: () => performance.now() - started, tokenContext: chat.prompt?.type !== "raw" };
    const replyStream = new NativeReplyStream(context);
    const options = engineOptions(request, reply, access, chat.model, "chat", keepAliveMs);

    // No messages (or prompt): load the model, or unload it with keep_alive 0. One object, streamed or not.
    if (generation.loadOnly) {
      if (keepAliveMs === 0) {
        await engine.unload(chat.model);
        return replyStream.loaded("unload");
      }
      await engine.load(chat.model, { signal: options.signal, keepAliveMs });
      return replyStream.loaded("load");
    }

    const events = await engine.chat(chat, options);
    if (!stream) return toNativeReply(context, events);

    await pumpStream(new NdjsonWriter(reply), events, replyStream, { signal: options.signal, log: request.log });
  }

  app.post(
    "/embed",
    { config: described(config, { summary: "Native embeddings (normalised)", body: embedRequestSchema, response: embedResponseSchema }) },
    async (request, reply) => {
      const started = performance.now();
      const { embed, keepAliveMs } = fromEmbedRequest(request.body);
      const options = engineOptions(request, reply, access, embed.model, "embeddings", keepAliveOf(keepAliveMs));
      if (embed.inputs.length === 0) {
        const { loadMs } = await engine.load(embed.model, options);
        return toEmbedResponse(embed.model, { vectors: [], promptTokens: 0, loadMs }, performance.now() - started);
      }
      const result = await engine.embed(embed, options);
      return toEmbedResponse(embed.model, result, performance.now() - started);
    },
  );

  app.post(
    "/embeddings",
    {
      config: described(config, {
        summary: "Legacy native embedding (not normalised)",
        body: legacyEmbeddingsRequestSchema,
        response: legacyEmbeddingsResponseSchema,
      }),
    },
    async (request, reply) => {
      const { embed, keepAliveMs } = fromLegacyEmbeddingsRequest(request.body);
      const options = engineOptions(request, reply, access, embed.model, "embeddings", keepAliveOf(keepAliveMs));
      if (embed.inputs.length === 0) {
        await engine.load(embed.model, options);
        return { embedding: [] };
      }
      const { vectors } = await engine.embed(embed, options);
      return { embedding: Array.from(vectors[0] ?? []) };
    },
  );

  app.get(
    "/tags",
    { config: described(config, { summary: "Installed models with digests and GGUF details", response: tagsResponseSchema }) },
    async (request) => {
      const models = await engine.listModels();
      const listed = await Promise.all(
        models.map((model) =>
          engine.modelDigest(model).then(
            (digest) => toListedModels(model, digest),
            (error: unknown) => {
              // A file removed while it was being hashed is left out of this listing rather than failing it.
              request.log.warn({ err: error, model: model.id }, "model left out of /api/tags: its file could not be hashed");
              return [];
            },
          ),
        ),
      );
      return { models: listed.flat() };
    },
  );

  app.post(
    "/show",
    { config: described(config, { summary: "One model's metadata and template", body: modelRequestSchema, response: showResponseSchema }) },
    async (request) => {
      const { model } = fromModelRequest(request.body);
      const description = await engine.describeModel(model);
      if (!description) throw new ServerError("model_not_found", { model, param: "model" });
      return toShowResponse(description);
    },
  );

  app.get("/ps", { config: described(config, { summary: "Loaded models", response: psResponseSchema }) }, async () => {
    const running = await Promise.all(
      engine.status().loaded.map(async (status) => {
        const model = await engine.findModel(status.id);
        return model ? [toRunningModel(status, model, await engine.modelDigest(model))] : [];
      }),
    );
    return { models: running.flat() };
  });

  app.post(
    "/copy",
    { config: described(management, { summary: "A new name (alias) for a model", body: copyRequestSchema }) },
    async (request, reply) => {
      const { source, destination } = fromCopyRequest(request.body);
      // The source is only looked up; the destination becomes a name, so it must be a valid one.
      assertModelName(destination, "destination");
      await models.copy(source, destination);
      return reply.status(200).send();
    },
  );

  app.delete(
    "/delete",
    { config: described(management, { summary: "Deletes an alias, or a model with its files", body: modelRequestSchema }) },
    async (request, reply) => {
      const { model: name } = fromModelRequest(request.body);
      assertModelName(name, "model");
      // An alias goes alone; the model's own name takes its file, its other names and its aliases.
      await models.delete(name);
      return reply.status(200).send();
    },
  );

  const notOffered = (action: "create" | "push") => async (request: FastifyRequest) => {
    // A name is refused as such (400) before the 501, as it would be if creating were offered.
    const body = request.body as { model?: unknown; name?: unknown } | null | undefined;
    const [param, name] = typeof body?.model === "string" ? ["model", body.model] : ["name", body?.name];
    if (typeof name === "string") assertModelName(name, param);
    throw new ServerError("not_implemented", {
      message:
        action === "create"
          ? "modelhost does not create models from Modelfiles. Copy a .gguf file into the models directory (or run `modelhost pull hf.co/OWNER/REPO:QUANT`), and give it other names with /api/copy or the aliases of models.json."
          : "modelhost does not push models to a registry.",
    });
  };
  app.post(
    "/create",
    { config: described(management, { summary: "Not offered (501): the message names the supported way" }) },
    notOffered("create"),
  );
  app.post("/push", { config: described(management, { summary: "Not offered (501)" }) }, notOffered("push"));
  app.route({
    method: ["HEAD", "POST"],
    url: "/blobs/:digest",
    config: described(management, { summary: "Not offered (501): models are not created from blobs" }),
    handler: notOffered("create"),
  });
}
