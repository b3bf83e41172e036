import type { FastifyInstance } from "fastify";
import type { Config } from "../config/settings.js";
import { LlamaEngine } from "../engine/LlamaEngine.js";
import { loadLlama } from "../engine/loadLlama.js";
import { ModelRegistry } from "../engine/ModelRegistry.js";
import { buildApp } from "../http/buildApp.js";
import { createLogger } from "./createLogger.js";

export interface RunningServer {
  app: FastifyInstance;
  /** The address actually bound, e.g. http://127.0.0.1:11434 (useful with --port 0). */
  url: string;
  close(): Promise<void>;
}

/** Composition root of the server: the real engine behind the HTTP app, listening. */
export async function serve(config: Config): Promise<RunningServer> {
  const logger = createLogger(config.logLevel);
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
  const app = await buildApp({ engine, bodyLimit: config.bodyLimit, corsOrigins: config.corsOrigins, logger });
  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    await engine.close();
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const host = config.host.includes(":") ? `[${config.host}]` : config.host;
  const url = `http://${host}:${port}`;
  const models = await registry.list();
  logger.info({ url, backend, threads, modelsDir: config.modelsDir, models: models.map((model) => model.id) }, "modelhost listening");

  let closing: Promise<void> | undefined;
  return {
    app,
    url,
    close: () => (closing ??= app.close().then(() => engine.close())),
  };
}
