import os from "node:os";
import type { FastifyInstance } from "fastify";
import type { DestinationStream, Logger } from "pino";
import { ResponseArchive } from "../storedResponses/ResponseArchive.js";
import type { Config } from "../config/settings.js";
import type { Engine } from "../core/Engine.js";
import type { ModelStore } from "../core/ModelStore.js";
import { LlamaEngine } from "../engine/LlamaEngine.js";
import { loadLlama } from "../engine/loadLlama.js";
import { DirectoryModelStore } from "../engine/DirectoryModelStore.js";
import { ModelRegistry } from "../engine/ModelRegistry.js";
import { buildApp } from "../http/buildApp.js";
import { Drain, type DrainReport } from "../http/Drain.js";
import { createLogger } from "./createLogger.js";
import { openGate, openResponseStore } from "./openAccess.js";
import { pullSettingsOf } from "./pullSettings.js";
import { FleetEngine } from "../upstream/FleetEngine.js";
import { UpstreamEngine } from "../upstream/UpstreamEngine.js";
import { readUpstreams, UpstreamConfigError, type UpstreamModels } from "../upstream/upstreamConfig.js";
import { upstreamMetrics } from "../upstream/upstreamMetrics.js";
import type { Registry } from "prom-client";

export interface RunningServer {
  app: FastifyInstance;
  /** The address actually bound, e.g. http://127.0.0.1:11434 (useful with --port 0). */
  url: string;
  /** The installed models' names when it started. */
  models: string[];
  /** Closes at once: in-flight requests are not waited for. */
  close(): Promise<void>;
  /**
   * Reads the --upstreams file again (SIGHUP) and serves what it declares from the next request on;
   * requests under way are not dropped. Resolves to what happened, for the log; a file that does not
   * read keeps the upstreams as they were.
   */
  reload(): Promise<string>;
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
  const logger = serverLogger(config, options);
  const { llama, backend, threads } = await loadLlama({
    engine: config.engine,
    gpu: config.gpu,
    threads: config.threads === "auto" ? undefined : config.threads,
    onLog: (level, message) => logger[level]({ source: "llama.cpp" }, message),
  });
  const registry = new ModelRegistry(config.modelsDir, { logger: { warn: (message) => logger.warn(message) } });
  const local = new LlamaEngine(llama, registry, {
    contextSize: config.contextSize,
    parallel: config.parallel,
    batchSize: config.batchSize,
    threads,
    maxQueue: config.maxQueue,
    cacheTypeK: config.cacheTypeK,
    cacheTypeV: config.cacheTypeV,
    maxGenerationMs: config.maxGenerationTime,
    streamHoldMs: config.streamHold,
    cacheRamMiB: config.cacheRam,
    speculation:
      config.speculation === "none"
        ? undefined
        : { type: config.speculation, draftMax: config.draftMax, ...(config.draftModel ? { draftModel: config.draftModel } : {}) },
    maxLoadedModels: config.maxLoadedModels,
    keepAliveMs: config.keepAlive,
    backend,
    logger,
  });
  const upstream = config.upstreams
    ? new UpstreamEngine(new Map(), {
        timeouts: {
          connectMs: config.upstreamConnectTimeout,
          firstByteMs: config.upstreamFirstByteTimeout,
          idleMs: config.upstreamIdleTimeout,
        },
      })
    : undefined;
  /**
   * The upstreams file, read and its endpoints' usage checked (UpstreamEngine.checkUsage): one
   * that answers without usage is refused, as the file is when it does not read.
   */
  const readChecked = async (file: string): Promise<UpstreamModels> => {
    const models = await readUpstreams(file);
    const problems = await upstream!.checkUsage(models);
    const noUsage = problems.find((problem) => problem.noUsage);
    if (noUsage) {
      throw new UpstreamConfigError(
        `The upstream ${noUsage.endpoint} serving \`${noUsage.model}\` streams chat completions without usage (stream_options.include_usage), which limits and the usage ledger settle to: serve the model with a server that reports it, or remove the endpoint from ${file}.`,
      );
    }
    for (const problem of problems) logger.warn(problem, "upstream endpoint's usage not checked now: it is checked by use");
    return models;
  };
  if (upstream) upstream.replace(await readChecked(config.upstreams));
  if (upstream && config.upstreamHealthInterval > 0) upstream.checkHealth(config.upstreamHealthInterval);
  const engine = upstream ? new FleetEngine(local, upstream) : local;
  // The engine itself (not the app's observed wrapper of it): unloading a deleted model is no request.
  const models = new DirectoryModelStore(registry, { engine: local, pull: pullSettingsOf(config) });
  const server = await serveWith(
    config,
    { engine, models, logger, stop: () => registry.stop(), ...(upstream ? { metrics: upstreamMetrics(upstream) } : {}) },
    options,
  );
  const names = (await registry.list()).map((model) => model.id);
  logger.info(
    { url: server.url, profile: config.profile, backend, threads, modelsDir: config.modelsDir, models: names },
    "modelhost listening",
  );
  const reload = async (): Promise<string> => {
    if (!upstream) return "nothing to reload (no --upstreams)";
    try {
      const models = await readChecked(config.upstreams);
      upstream.replace(models);
      logger.info({ upstreams: config.upstreams, models: [...models.keys()] }, "upstreams reloaded");
      return `reloaded ${config.upstreams}: ${models.size} upstream model${models.size === 1 ? "" : "s"}`;
    } catch (error) {
      logger.warn({ err: error }, "upstreams not reloaded");
      return `${(error as Error).message} The upstreams stay as they were.`;
    }
  };
  return { ...server, models: names, reload };
}

/** The server's logger: --log-level and --log-format, to stdout or the options' destination. */
export function serverLogger(config: Config, options: ServeOptions = {}): Logger {
  return createLogger(config.logLevel, {
    format: config.logFormat,
    ...(options.logDestination ? { destination: options.logDestination } : {}),
  });
}

/** What serveWith puts the HTTP server around: an engine (llama.cpp's, or a test's own) and its model store. */
export interface ServedEngine {
  engine: Engine;
  models: ModelStore;
  logger: Logger;
  /** Called once shutdown's grace is over, before closing (the registry's scans of the models folder). */
  stop?: () => void;
  /** The engine's own metrics (its upstreams'), for /metrics. */
  metrics?: (registry: Registry) => void;
}

/**
 * The server around an engine, listening: the gate and stores of the profile, the app, and the
 * close and graceful shutdown that end them. serve() calls it with llama.cpp's engine; tests call
 * it with a fake one (test/support/fakeEngine.ts), so both are composed alike.
 */
export async function serveWith(
  config: Config,
  { engine, models, logger, stop, metrics }: ServedEngine,
  options: ServeOptions = {},
): Promise<Omit<RunningServer, "models" | "reload">> {
  const access = config.profile === "hosted" ? await openGate(config, logger, options.now) : undefined;
  // Opened on the first request that stores or reads a response, not at start.
  const responses = new ResponseArchive(() => openResponseStore(config), { ttlMs: config.responseExpiry, logger, now: options.now });
  const { headersTimeout, requestTimeout, idleConnectionTimeout: idleTimeout, maxConnections } = config;
  const drain = new Drain();
  const app = await buildApp({
    engine,
    access: access?.gate,
    responses,
    playground: access,
    trustProxy: config.trustProxy,
    models,
    bodyLimit: config.bodyLimit,
    images: {
      maxImages: config.maxImages,
      maxBytes: config.maxImageBytes,
      maxPixels: config.maxImagePixels,
      fetchUrls: config.imageUrls,
      fetchTimeoutMs: config.imageUrlTimeout,
    },
    connections: { headersTimeout, requestTimeout, idleTimeout, maxConnections },
    corsOrigins: config.corsOrigins,
    hosts: { listen: config.host, allowed: config.allowedHosts },
    streamLimits: { keepaliveMs: config.streamKeepalive, stallMs: config.streamStallTimeout },
    drain,
    metricsToken: config.metricsToken,
    ...(metrics ? { engineMetrics: metrics } : {}),
    logger,
    playgroundDir: options.playgroundDir,
  });
  const closeParts = () => Promise.all([engine.close(), access?.close(), responses.close()]).then(() => undefined);
  const port = config.port === "auto" ? (config.profile === "hosted" ? 8080 : 11434) : config.port;
  try {
    await app.listen({ host: config.host, port });
  } catch (error) {
    await closeParts();
    throw error;
  }
  const address = app.server.address();
  const boundPort = typeof address === "object" && address ? address.port : port;
  const host = config.host.includes(":") ? `[${config.host}]` : config.host;
  const url = `http://${host}:${boundPort}`;
  await access?.gate.claimInstance(`${os.hostname()} ${url}`);

  let closing: Promise<void> | undefined;
  const close = () => (closing ??= app.close().then(closeParts));
  let shuttingDown: Promise<DrainReport> | undefined;
  const shutdown = () =>
    (shuttingDown ??= (async () => {
      logger.info({ graceMs: config.shutdownGrace }, "shutting down: draining requests in flight");
      const report = await drain.finish(config.shutdownGrace, () =>
        engine.status().loaded.every((model) => model.active === 0 && model.queued === 0),
      );
      // A request still waiting on a scan of the models folder ends with it, so close() need not wait for it.
      stop?.();
      await close();
      logger.info(report, "shut down");
      return report;
    })());
  return { app, url, close, shutdown };
}
