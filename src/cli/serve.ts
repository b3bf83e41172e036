import os from "node:os";
import type { FastifyInstance } from "fastify";
import type { DestinationStream } from "pino";
import { ResponseArchive } from "../storedResponses/ResponseArchive.js";
import type { Config } from "../config/settings.js";
import { LlamaEngine } from "../engine/LlamaEngine.js";
import { loadLlama } from "../engine/loadLlama.js";
import { DirectoryModelStore } from "../engine/DirectoryModelStore.js";
import { ModelRegistry } from "../engine/ModelRegistry.js";
import { buildApp } from "../http/buildApp.js";
import { Drain, type DrainReport } from "../http/Drain.js";
import { createLogger } from "./createLogger.js";
import { openGate, openResponseStore } from "./openAccess.js";
import { pullSettingsOf } from "./pullSettings.js";

export interface RunningServer {
  app: FastifyInstance;
  /** The address actually bound, e.g. http://127.0.0.1:11434 (useful with --port 0). */
  url: string;
  /** The installed models' names when it started. */
  models: string[];
  /** Closes at once: in-flight requests are not waited for. */
  close(): Promise<void>;
  /**
   * Graceful shutdown (SIGTERM, SIGINT): stops accepting connections, /health not-ready at once,
   * waits up to --shutdown-grace for the requests in flight, cuts the rest with an error event,
   * then closes (the usage ledger is flushed and the stores closed). Resolves with what happened.
   */
  shutdown(): Promise<DrainReport>;
}

/** Composition root of the server: the real engine behind the HTTP app, listening. */
export interface ServeOptions {
  logDestination?: DestinationStream;
  /** The built playground page (default: web/dist of this package). */
  playgroundDir?: string;
  /** The clock of token, session and stored-response expiry (tests move it instead of waiting). */
  now?: () => number;
}

export async function serve(config: Config, options: ServeOptions = {}): Promise<RunningServer> {
  const logger = createLogger(config.logLevel, {
    format: config.logFormat,
    ...(options.logDestination ? { destination: options.logDestination } : {}),
  });
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
    maxGenerationMs: config.maxGenerationTime,
    streamHoldMs: config.streamHold,
    maxLoadedModels: config.maxLoadedModels,
    keepAliveMs: config.keepAlive,
    backend,
    logger,
  });
  const access = config.profile === "hosted" ? await openGate(config, logger, options.now) : undefined;
  // Opened on the first request that stores or reads a response, not at start.
  const responses = new ResponseArchive(() => openResponseStore(config), { ttlMs: config.responseExpiry, logger, now: options.now });
  const { headersTimeout, requestTimeout, idleConnectionTimeout: idleTimeout, maxConnections } = config;
  const connections = { headersTimeout, requestTimeout, idleTimeout, maxConnections };
  // The engine itself (not the app's observed wrapper of it): unloading a deleted model is no request.
  const modelStore = new DirectoryModelStore(registry, {
    engine,
    pull: pullSettingsOf(config),
  });
  const drain = new Drain();
  const streamLimits = { keepaliveMs: config.streamKeepalive, stallMs: config.streamStallTimeout };
  const app = await buildApp({
    engine,
    access: access?.gate,
    responses,
    playground: access,
    trustProxy: config.trustProxy,
    models: modelStore,
    bodyLimit: config.bodyLimit,
    connections,
    corsOrigins: config.corsOrigins,
    hosts: { listen: config.host, allowed: config.allowedHosts },
    streamLimits,
    drain,
    metricsToken: config.metricsToken,
    logger,
    playgroundDir: options.playgroundDir,
  });
  const port = config.port === "auto" ? (config.profile === "hosted" ? 8080 : 11434) : config.port;
  try {
    await app.listen({ host: config.host, port });
  } catch (error) {
    await engine.close();
    await access?.close();
    await responses.close();
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
  const close = () =>
    (closing ??= app
      .close()
      .then(() => Promise.all([engine.close(), access?.close(), responses.close()]))
      .then(() => undefined));
  let shuttingDown: Promise<DrainReport> | undefined;
  const shutdown = () =>
    (shuttingDown ??= (async () => {
      logger.info({ graceMs: config.shutdownGrace }, "shutting down: draining requests in flight");
      const report = await drain.finish(config.shutdownGrace, () =>
        engine.status().loaded.every((model) => model.active === 0 && model.queued === 0),
      );
      // A request still waiting on a scan of the models folder ends with it, so close() need not wait for it.
      registry.stop();
      await close();
      logger.info(report, "shut down");
      return report;
    })());
  return { app, url, models, close, shutdown };
}
