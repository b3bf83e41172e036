/**
 * The limits that apply to one account (and model group), resolved from its tier. Absent fields
 * are unlimited.
 */
export interface LimitPolicy {
  requestsPerMinute?: number;
  requestsPerDay?: number;
  tokensPerDay?: number;
  concurrentRequests?: number;
}

/** What the x-ratelimit-* headers report. `resetSeconds`: until a unit becomes available again (requests) or the budget refills (tokens). */
export interface LimitState {
  requests?: { limit: number; remaining: number; resetSeconds: number };
  tokens?: { limit: number; remaining: number; resetSeconds: number };
}

export type LimitName = "requests_per_minute" | "requests_per_day" | "tokens_per_day" | "concurrent_requests";

export type Admission =
  | { allowed: true; reservation: Reservation; state: LimitState }
  | { allowed: false; limit: LimitName; retryAfterSeconds: number; state: LimitState };

/** A request admitted: it holds one request unit, `tokens` of the day's budget and a concurrency slot until settled. */
export interface Reservation {
  key: string;
  id: string;
  tokens: number;
  /** When it was admitted (the limiter's clock, ms): the day its tokens count against. */
  at: number;
}

/**
 * Counts requests and tokens per key (an account, or an account and model group) and admits or
 * refuses atomically, so concurrent requests can never overshoot a limit:
 * - requests per minute: a sliding window over the last 60 s (not a fixed window, which lets twice
 *   the limit through around its boundary);
 * - requests and tokens per day: the UTC day;
 * - concurrent requests: admitted and not yet settled.
 * `admit` reserves the request's worst case (prompt + maximum output); `settle` replaces the
 * reservation with what was really used (for a stream, up to its end or the client's abort) and
 * frees the concurrency slot. The day's tokens never exceed the limit, whatever the concurrency.
 */
export interface RateLimiter {
  admit(key: string, policy: LimitPolicy, tokens: number): Promise<Admission>;
  settle(reservation: Reservation, usedTokens: number): Promise<void>;
  /** The state without admitting anything, for responses that consume no unit. */
  peek(key: string, policy: LimitPolicy): Promise<LimitState>;
  close(): Promise<void>;
}
