import type { FastifyInstance, RouteHandlerMethod } from "fastify";
import { z } from "zod";
import type { AccessGate, Caller } from "../../access/AccessGate.js";
import type { UsageRow } from "../../access/AccessStore.js";
import type { LimitState } from "../../access/RateLimiter.js";
import { ServerError } from "../../core/ServerError.js";
import { same, type Same } from "../../protocols/sameShape.js";
import { toInvalidRequestError } from "../../protocols/toInvalidRequestError.js";

export const usageQuerySchema = z.object({ since: z.iso.date().optional() });

/** A limit as it stands; `resetSeconds` (fractional) is the limiter's own name, which the playground page reads. */
const limitFigure = z.object({ limit: z.int(), remaining: z.int(), resetSeconds: z.number() });

/** GET /v1/usage and the playground's GET /playground/api/usage. */
export const usageResponseSchema = z.object({
  object: z.literal("usage"),
  account: z.object({ name: z.string(), tier: z.string() }),
  since: z.iso.date(),
  /** Each limit the account's tier sets (none: no limit). */
  limits: z.object({ requests_per_minute: limitFigure.optional(), tokens_per_day: limitFigure.optional() }),
  /** One row per day and model, UTC days. */
  data: z.array(z.object({ date: z.iso.date(), model: z.string(), requests: z.int(), prompt_tokens: z.int(), completion_tokens: z.int() })),
});

/**
 * GET /v1/usage (our extension, hosted profile): the signed-in token's account, its usage per day
 * and model since `since` (default: today, UTC), and its limits as they stand.
 */
export function usageRoutes(app: FastifyInstance, access: AccessGate): void {
  app.get(
    "/usage",
    {
      config: {
        access: "caller",
        openapi: {
          summary: "Hosted profile: the token's account, its usage per day and model, and its limits",
          query: usageQuerySchema,
          response: usageResponseSchema,
        },
      },
    },
    usageHandler(access),
  );
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
    return toUsage(caller, since, rows, limits);
  };
}

function toUsage(caller: Caller, since: string, rows: UsageRow[], limits: LimitState) {
  return {
    object: "usage" as const,
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
}

same<Same<z.infer<typeof usageResponseSchema>, ReturnType<typeof toUsage>>>(true);
