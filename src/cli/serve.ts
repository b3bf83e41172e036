import os from "node:os";
import type { FastifyInstance } from "fastify";
import type { DestinationStream } from "pino";
import type { Config } from "../config/settings.js";
import { LlamaEngine } from "../engine/LlamaEngine.js";
import { loadLlama } from "../engine/loadLlama.js";
import { ModelRegistry } from "../engine/ModelRegistry.js";
import { buildApp } from "../http/buildApp.js";
import type { PullModel } from "../http/routes/modelManagementRoutes.js";
import { pullModel } from "../models/pullModel.js";
import { createLogger } from "./createLogger.js";
import { openGate } from "./openAccess.js";

export interface RunningServer {
  app: FastifyInstance;
  /** The address actually bound, e.g. http://127.0.0.1:11434 (useful with --port 0). */
  url: string;
  /** The installed models' names when it started. */
  models: string[];
  close(): Promise<void>;
}

/** Composition root of the server: the real engine behind the HTTP app, listening. */
export async function serve(config: Config, options: { logDestination?: DestinationStream } = {}): Promise<RunningServer> {
  const logger = createLogger(config.logLevel, { format: config.logFormat, ...(options.logDestination ? { destination: options.logDestination } : {}) });
  const { llama, backend, threads } = await loadLlama({
    engine: config.engine,
    gpu: config.gpu,
    threads: config.threads === "auto" ? undefined : config.threads,
    onLog: (level, message) => logger[level]({ source: "llama.cpp" }, message),
  });
  const registry = new ModelRegistry(config.modelsDir, { logger: { warn: (message) => logger.warn(message) } });
  const engine = new LlamaEngine(llama, registry, {
    contextSize: config.contextSize,
    parallel: config.parallel,
    batchSize: config.batchSize,
    threads,
    maxQueue: config.maxQueue,
    maxLoadedModels: config.maxLoadedModels,
    keepAliveMs: config.keepAlive,
    backend,
    logger,
  });
  const access = config.profile === "hosted" ? await openGate(config, logger) : undefined;
  const { headersTimeout, requestTimeout, idleConnectionTimeout: idleTimeout, maxConnections } = config;
  const connections = { headersTimeout, requestTimeout, idleTimeout, maxConnections };
  const pull: PullModel = (reference, options) =>
    pullModel(reference, { modelsDir: config.modelsDir, hfEndpoint: config.hfEndpoint, ...(config.hfToken ? { hfToken: config.hfToken } : {}), ...options });
  const app = await buildApp({ engine, access: access?.gate, modelsDir: config.modelsDir, pull, bodyLimit: config.bodyLimit, connections, corsOrigins: config.corsOrigins, logger });
  const port = config.port === "auto" ? (config.profile === "hosted" ? 8080 : 11434) : config.port;
  try {
    await app.listen({ host: config.host, port });
  } catch (error) {
    await engine.close();
    await access?.close();
    throw error;
  }
  const address = app.server.address();
  const boundPort = typeof address === "object" && address ? address.port : port;
  const host = config.host.includes(":") ? `[${config.host}]` : config.host;
  const url = `http://${host}:${boundPort}`;
  await access?.gate.claimInstance(`${os.hostname()} ${url}`);
  const models = (await registry.list()).map((model) => model.id);
  logger.info({ url, profile: config.profile, backend, threads, modelsDir: config.modelsDir, models }, "modelhost listening");

  let closing: Promise<void> | undefined;
  return {
    app,
    url,
    models,
    close: () => (closing ??= app.close().then(() => Promise.all([engine.close(), access?.close()])).then(() => undefined)),
  };
}
