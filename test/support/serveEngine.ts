import os from "node:os";
import type { FastifyInstance } from "fastify";
import { createLogger } from "../../src/cli/createLogger.js";
import { openGate, openResponseStore } from "../../src/cli/openAccess.js";
import type { ServeOptions } from "../../src/cli/serve.js";
import type { Config } from "../../src/config/settings.js";
import type { Engine } from "../../src/core/Engine.js";
import { buildApp } from "../../src/http/buildApp.js";
import { ResponseArchive } from "../../src/storedResponses/ResponseArchive.js";
import { EmptyModelStore } from "./emptyModelStore.js";

/**
 * serve()'s composition (src/cli/serve.ts) around an engine of the test's own (a FakeEngine)
 * instead of llama.cpp's: the same gate, stores and app options from the same configuration, in
 * either profile. Its model store has no models (these servers change none).
 */
export async function serveEngine(
  engine: Engine,
  config: Config,
  options: ServeOptions = {},
): Promise<{ app: FastifyInstance; url: string; close(): Promise<void> }> {
  const logger = createLogger(config.logLevel, {
    format: config.logFormat,
    ...(options.logDestination ? { destination: options.logDestination } : {}),
  });
  const access = config.profile === "hosted" ? await openGate(config, logger, options.now) : undefined;
  const responses = new ResponseArchive(() => openResponseStore(config), { ttlMs: config.responseExpiry, logger, now: options.now });
  const { headersTimeout, requestTimeout, idleConnectionTimeout: idleTimeout, maxConnections } = config;
  const { trustProxy, bodyLimit, corsOrigins, metricsToken } = config;
  const app = await buildApp({
    engine,
    models: new EmptyModelStore(),
    access: access?.gate,
    playground: access,
    responses,
    connections: { headersTimeout, requestTimeout, idleTimeout, maxConnections },
    hosts: { listen: config.host, allowed: config.allowedHosts },
    streamLimits: { keepaliveMs: config.streamKeepalive, stallMs: config.streamStallTimeout },
    trustProxy,
    bodyLimit,
    corsOrigins,
    metricsToken,
    logger,
    playgroundDir: options.playgroundDir,
  });
  const closeAll = () => Promise.all([engine.close(), access?.close(), responses.close()]).then(() => undefined);
  try {
    await app.listen({ host: config.host, port: config.port === "auto" ? 0 : config.port });
  } catch (error) {
    await closeAll();
    throw error;
  }
  const { port } = app.server.address() as { port: number };
  const url = `http://${config.host}:${port}`;
  await access?.gate.claimInstance(`${os.hostname()} ${url}`);
  return { app, url, close: () => app.close().then(closeAll) };
}
