import type { Server } from "node:http";
import type { Socket } from "node:net";
import type { FastifyInstance } from "fastify";

/** Limits on what a client may hold: time to send a request, idle keep-alive time, connections. */
export interface ConnectionLimits {
  /** ms to receive a request's headers (Node's headersTimeout); capped at requestTimeout. */
  headersTimeout: number;
  /** ms to receive a whole request, body included (Node's requestTimeout); responses are not limited. */
  requestTimeout: number;
  /** ms a keep-alive connection may stay idle between requests. */
  idleTimeout: number;
  /** Open connections at most; Node closes any beyond it as soon as it is accepted. */
  maxConnections: number;
}

/**
 * Fastify's server options that enforce the time limits (it sets keepAliveTimeout and
 * requestTimeout on Node's server itself, and passes `http` on to http.createServer). Node checks
 * the header and request timeouts of open connections every `connectionsCheckingInterval` (30 s by
 * default, which let a slow client hold on for its timeout plus up to 30 s); a quarter of the
 * shorter timeout, at most 1 s, keeps the overshoot small. Each check walks the open connections,
 * at most `maxConnections`, so it stays cheap.
 */
export function serverOptions(limits: ConnectionLimits) {
  const headersTimeout = Math.min(limits.headersTimeout, limits.requestTimeout);
  return {
    keepAliveTimeout: limits.idleTimeout,
    requestTimeout: limits.requestTimeout,
    http: {
      headersTimeout,
      requestTimeout: limits.requestTimeout,
      connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(headersTimeout / 4))),
    },
  };
}

/**
 * Applies the connection cap, and on shutdown closes connections that never sent a request
 * (clients' pools open sockets ahead of use): Node's closeIdleConnections() counts them as busy,
 * so shutdown would otherwise wait for their header timeout.
 */
export function limitConnections(app: FastifyInstance, limits: ConnectionLimits): void {
  const server: Server = app.server;
  server.maxConnections = limits.maxConnections;
  const unused = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    unused.add(socket);
    socket.once("close", () => unused.delete(socket));
  });
  server.on("request", (request: { socket: Socket }) => unused.delete(request.socket));
  app.addHook("preClose", async () => {
    for (const socket of unused) socket.destroy();
  });
}
