import type { FastifyReply } from "fastify";
import type { LimitState } from "../access/RateLimiter.js";

/** OpenAI's duration format for x-ratelimit-reset-*: `1s`, `6m0s`, `1h2m3s`. */
export function formatResetDuration(seconds: number): string {
  const total = Math.max(0, Math.ceil(seconds));
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const rest = total % 60;
  if (hours > 0) return `${hours}h${minutes}m${rest}s`;
  if (minutes > 0) return `${minutes}m${rest}s`;
  return `${rest}s`;
}

/** The x-ratelimit-* headers of a limited key, on every response (set before a stream's first byte). */
export function setRateLimitHeaders(reply: FastifyReply, state: LimitState): void {
  for (const [kind, limit] of [
    ["requests", state.requests],
    ["tokens", state.tokens],
  ] as const) {
    if (!limit) continue;
    reply.header(`x-ratelimit-limit-${kind}`, String(limit.limit));
    reply.header(`x-ratelimit-remaining-${kind}`, String(Math.max(0, limit.remaining)));
    reply.header(`x-ratelimit-reset-${kind}`, formatResetDuration(limit.resetSeconds));
  }
}
