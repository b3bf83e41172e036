import type { FastifyInstance, RouteHandlerMethod } from "fastify";
import { z } from "zod";
import type { AccessGate } from "../../access/AccessGate.js";
import { ServerError } from "../../core/ServerError.js";
import { toOpenAIError } from "../../protocols/openai/toOpenAIError.js";
import { toInvalidRequestError } from "../../protocols/toInvalidRequestError.js";

export const usageQuerySchema = z.object({ since: z.iso.date().optional() });

/**
 * GET /v1/usage (our extension, hosted profile): the signed-in token's account, its usage per day
 * and model since `since` (default: today, UTC), and its limits as they stand.
 */
export function usageRoutes(app: FastifyInstance, access: AccessGate): void {
  app.get("/v1/usage", { config: { access: "caller", errorShape: toOpenAIError, openapi: { summary: "Hosted profile: the token's account, its usage per day and model, and its limits", query: usageQuerySchema } } }, usageHandler(access));
}

/** GET /v1/usage; the playground's usage page is served by the same handler, for the signed-in account. */
export function usageHandler(access: AccessGate): RouteHandlerMethod {
  return async (request) => {
    const caller = request.caller;
    if (!caller) throw new ServerError("invalid_api_key");
    const parsed = usageQuerySchema.safeParse(request.query);
    if (!parsed.success) throw toInvalidRequestError(parsed.error, request.query);
    const since = parsed.data.since ?? new Date().toISOString().slice(0, 10);
    const [rows, limits] = await Promise.all([access.usage(caller, since), access.state(caller)]);
    return {
      object: "usage",
      account: { name: caller.account.name, tier: caller.account.tier },
      since,
      limits: {
        ...(limits.requests ? { requests_per_minute: limits.requests } : {}),
        ...(limits.tokens ? { tokens_per_day: limits.tokens } : {}),
      },
      data: rows.map((row) => ({
        date: row.day,
        model: row.model,
        requests: row.requests,
        prompt_tokens: row.promptTokens,
        completion_tokens: row.completionTokens,
      })),
    };
  };
}
