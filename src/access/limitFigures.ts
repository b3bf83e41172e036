import type { LimitPolicy, LimitState } from "./RateLimiter.js";

// What the SQLite and Redis rate limiters compute alike from a key's counters, and the times both
// keep. The Redis limiter computes its decisions in Lua, inside Redis; these are its JavaScript side.

export const DAY_MS = 86_400_000;
/** The sliding window's length. */
export const MINUTE_MS = 60_000;
/**
 * The longest an unsettled reservation holds its concurrency slot, whatever its holder: a backstop
 * for one a live holder failed to settle (the storage was unreachable then). Its tokens stay counted.
 */
export const RESERVATION_TTL_MS = 3_600_000;
/**
 * A holder that has not renewed its lease for this long is taken for dead. Six heartbeats: a
 * holder that misses a few (a stalled event loop, a slow store) keeps its reservations.
 */
export const LEASE_MS = 60_000;
/** How often a holder renews its lease: a dead holder's reservations are released within LEASE_MS + HEARTBEAT_MS (70 s) of its last heartbeat. */
export const HEARTBEAT_MS = 10_000;
/** A refused concurrent request may retry this soon: slots free as other requests end. */
export const CONCURRENCY_RETRY_MS = 1_000;

/** The lengths both limiters take, each defaulting to the constant above; shorter in tests. */
export interface LimiterTimings {
  /** The sliding window's length (MINUTE_MS). */
  minuteMs?: number;
  /** The longest an unsettled reservation holds its slot (RESERVATION_TTL_MS). */
  reservationTtlMs?: number;
  /** A holder's lease (LEASE_MS). */
  leaseMs?: number;
}

/** One key's counters at one instant: what the reported state depends on. */
export interface Figures {
  /** The limiter's clock, ms since the epoch. */
  now: number;
  /** Requests in the sliding window. */
  windowCount: number;
  /** ms until the window next gives a request unit back (0 when empty). */
  windowWaitMs: number;
  dayTokens: number;
}

/** Whole UTC days since the epoch: the day a count belongs to. */
export function utcDay(ms: number): number {
  return Math.floor(ms / DAY_MS);
}

export function msUntilUtcMidnight(ms: number): number {
  return (utcDay(ms) + 1) * DAY_MS - ms;
}

/**
 * `requests`: the sliding window; resetSeconds is until it next gives a unit back (0 when empty),
 * which on a refusal is the Retry-After. `tokens`: the UTC day; resetSeconds is until midnight.
 */
export function stateOf(policy: LimitPolicy, figures: Figures): LimitState {
  const state: LimitState = {};
  if (policy.requestsPerMinute !== undefined) {
    const limit = policy.requestsPerMinute;
    state.requests = { limit, remaining: Math.max(0, limit - figures.windowCount), resetSeconds: figures.windowWaitMs / 1000 };
  }
  if (policy.tokensPerDay !== undefined) {
    const limit = policy.tokensPerDay;
    state.tokens = { limit, remaining: Math.max(0, limit - figures.dayTokens), resetSeconds: msUntilUtcMidnight(figures.now) / 1000 };
  }
  return state;
}

/** Whole seconds, at least 1: Retry-After is an integer, and 0 would invite an immediate retry that fails. */
export function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000));
}

/** A programming error, not the limiter being unavailable: counts are non-negative integers, and a prompt is part of its reservation. */
export function assertTokenCount(tokens: number, promptTokens = 0): void {
  for (const count of [tokens, promptTokens]) {
    if (!Number.isSafeInteger(count) || count < 0) throw new RangeError(`token count must be a non-negative integer, not ${count}`);
  }
  if (promptTokens > tokens) throw new RangeError(`prompt tokens (${promptTokens}) exceed the reservation (${tokens})`);
}
