import type { FastifyReply, FastifyRequest } from "fastify";
import type { AccessGate } from "../access/AccessGate.js";
import type { Endpoint } from "../access/tiers.js";
import type { RequestOptions } from "../core/Engine.js";
import { ServerError } from "../core/ServerError.js";
import { abortSignalOf } from "./abortSignalOf.js";
import { setRateLimitHeaders } from "./rateLimitHeaders.js";

/**
 * The engine options of one request, for every protocol's routes: its abort signal and, in the
 * hosted profile, its admission against the caller's limits. A hosted request without a caller
 * cannot happen (the route's access policy authenticated it); if it does, it fails closed.
 */
export function engineOptions(
  request: FastifyRequest,
  reply: FastifyReply,
  access: AccessGate | undefined,
  model: string,
  endpoint: Endpoint,
  keepAliveMs?: number,
): RequestOptions {
  const signal = abortSignalOf(reply);
  // The generation's summary line goes to this request's log (with its id) and names the account.
  const account = request.caller?.account.name;
  const origin = {
    log: (fields: object, message: string) => request.log.info(fields, message),
    ...(account === undefined ? {} : { account }),
  };
  const base: RequestOptions = keepAliveMs === undefined ? { signal, origin } : { signal, origin, keepAliveMs };
  if (!access) return base;
  const caller = request.caller;
  if (!caller)
    throw new ServerError("internal_error", {
      cause: new Error(`Hosted profile: ${request.method} ${request.url} reached the engine without a caller.`),
    });
  return { ...base, admit: (size) => access.admit(caller, model, endpoint, size, (state) => setRateLimitHeaders(reply, state)) };
}
