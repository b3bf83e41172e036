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
 * frees the concurrency slot. The day's tokens never exceed the limit, whatever the concurrency,
 * as long as a reservation is the request's worst case; one that used more (an upstream model's
 * prompt, reserved as an estimate) is charged in full, and the day passes its limit by the excess.
 *
 * Holders. Each limiter instance (a server process) holds the reservations it admitted, under a
 * lease it renews with `heartbeat`. A holder that dies (kill -9, a crashed machine) never settles;
 * once its lease has run out, the next heartbeat of any other holder releases its reservations:
 * each is charged its prompt (what a started request is known to have used), the rest of its
 * reservation goes back to the day's budget, and its concurrency slot is freed. Its request unit
 * stays counted, in the minute window and in the day: the request did start. An instance that
 * restarts on the same host and address releases its predecessor's reservations at once
 * (`claimInstance`). Failures to reach the storage are `LimiterUnavailableError`s.
 */
export interface RateLimiter {
  /**
   * Admits a request of at most `tokens` (its prompt plus its maximum output), or refuses it.
   * `promptTokens`, part of `tokens`, is what the request is charged if this limiter's holder dies
   * before settling it.
   */
  admit(key: string, policy: LimitPolicy, tokens: number, promptTokens?: number): Promise<Admission>;
  settle(reservation: Reservation, usedTokens: number): Promise<void>;
  /** The state without admitting anything, for responses that consume no unit. */
  peek(key: string, policy: LimitPolicy): Promise<LimitState>;
  /**
   * Renews this holder's lease, and releases the reservations of holders whose lease has run out.
   * Call it every HEARTBEAT_MS: a holder that has not for its lease (LEASE_MS) is taken for dead.
   */
  heartbeat(): Promise<void>;
  /**
   * Names the instance this holder serves: its host and the address it listens on, which no other
   * live server can share. Reservations of earlier holders of that name (this instance before a
   * restart) are released at once. Call it once listening.
   */
  claimInstance(name: string): Promise<void>;
  /** Ends this holder's lease: what it has not settled is released by the next heartbeat of another holder. */
  close(): Promise<void>;
}

/**
 * The limiter could not answer (its storage unreachable, locked or too slow): the caller refuses
 * the request with a 503, never lets it through. Limits fail closed. Any other error a limiter
 * throws is a bug.
 */
export class LimiterUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`rate limiter unavailable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "LimiterUnavailableError";
  }
}
