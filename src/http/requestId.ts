import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { FastifyInstance } from "fastify";

/**
 * An incoming x-request-id worth keeping: what proxies and clients generate (UUIDs, hex, base64url,
 * nginx's $request_id), at most 128 characters of [A-Za-z0-9._:-]. Anything else (control
 * characters that could forge log lines, kilobytes of text) is replaced by our own id.
 */
const WELL_FORMED = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Fastify's genReqId: the client's or proxy's x-request-id when it is well-formed (so one id
 * follows a request through nginx and every replica's logs), else a random UUID. Sent only once:
 * repeated headers, which Node joins with ", ", fail the check.
 */
export function requestIdOf(request: IncomingMessage): string {
  const incoming = request.headers["x-request-id"];
  return typeof incoming === "string" && WELL_FORMED.test(incoming) ? incoming : randomUUID();
}

/**
 * Every response carries its request's id in x-request-id (what OpenAI's clients and proxies read)
 * and in request-id (what Anthropic's SDK reads, as `requestID`), streams too (they send the
 * headers set by hooks). One id in two headers: any client finds it under the name it knows.
 */
export function returnRequestId(app: FastifyInstance): void {
  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
    reply.header("request-id", request.id);
  });
}
