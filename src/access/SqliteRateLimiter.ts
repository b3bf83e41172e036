import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import type { Database as Connection, Statement, Transaction } from "better-sqlite3";
import type { Admission, LimitName, LimitPolicy, LimitState, RateLimiter, Reservation } from "./RateLimiter.js";
import { migrateSqlite } from "./migrateSqlite.js";

export interface SqliteRateLimiterOptions {
  /** The clock (ms since the epoch); tests move it instead of sleeping. */
  now?: () => number;
  /** The sliding window's length; shorter in tests. */
  minuteMs?: number;
  /**
   * How long an unsettled reservation holds its concurrency slot. A holder that crashed never
   * settles; past this age its slot is free again (its tokens stay counted: the worst case).
   */
  reservationTtlMs?: number;
}

const DAY_MS = 86_400_000;
const DEFAULT_MINUTE_MS = 60_000;
const DEFAULT_RESERVATION_TTL_MS = 3_600_000;
/** A refused concurrent request may retry this soon: slots free as other requests end. */
const CONCURRENCY_RETRY_MS = 1_000;
/** Long enough for another process's commit (tens of µs) or checkpoint; short, as the wait blocks the event loop. */
const BUSY_TIMEOUT_MS = 2_000;

/** This limiter's row in `schema_versions`, the table the limiter shares with the access store in one file. */
const SCHEMA_COMPONENT = "rate_limiter";

/** Migration n takes this component from version n to n + 1. Never edit a released one: append. */
const MIGRATIONS: readonly string[] = [
  `-- The sliding-window log: one row per admitted request, pruned once out of the window.
   CREATE TABLE rate_requests (
     key TEXT NOT NULL,
     at INTEGER NOT NULL,
     id TEXT NOT NULL,
     PRIMARY KEY (key, at, id)
   ) STRICT, WITHOUT ROWID;

   -- day: whole UTC days since the epoch. tokens: reserved by open requests plus used by settled ones.
   CREATE TABLE rate_days (
     key TEXT NOT NULL,
     day INTEGER NOT NULL,
     requests INTEGER NOT NULL,
     tokens INTEGER NOT NULL,
     PRIMARY KEY (key, day)
   ) STRICT, WITHOUT ROWID;

   -- Admitted and not yet settled: the concurrency count, and what settle must correct. Counting a
   -- key's rows scans them all, but they are few (a key's concurrent requests); an index on (key, at)
   -- would add a page to write to every admit and settle.
   CREATE TABLE rate_reservations (
     key TEXT NOT NULL,
     id TEXT NOT NULL,
     day INTEGER NOT NULL,
     tokens INTEGER NOT NULL,
     at INTEGER NOT NULL,
     PRIMARY KEY (key, id)
   ) STRICT, WITHOUT ROWID;`,
];

/**
 * One key's counters at one instant: everything a decision and the reported state depend on. The
 * window and the open reservations are only counted when the policy limits them (0 otherwise).
 */
interface Figures {
  now: number;
  /** Requests in the sliding window. */
  windowCount: number;
  /** ms until the window next gives a request unit back (see `windowWaitMs`). */
  windowWaitMs: number;
  dayRequests: number;
  dayTokens: number;
  /** Unexpired open reservations. */
  open: number;
}

interface ReservationRow {
  day: number;
  tokens: number;
}

/**
 * The rate limiter in the data directory's SQLite file: exact across every process that opens the
 * file (the server, a second server on the same directory), because each admit and settle is one
 * `BEGIN IMMEDIATE` transaction: it takes the file's write lock before reading the counters, so
 * concurrent admits, in one process or several, run one after the other and each sees the
 * previous one's rows. Within a process better-sqlite3 is synchronous, so no two transactions of
 * one connection interleave either.
 *
 * Durability: `synchronous=NORMAL`. In WAL mode a commit appends to the WAL without an fsync; a
 * killed process loses nothing (the pages are in the OS page cache), and only a power loss or
 * kernel crash can roll back the last commits, forgetting a few seconds of counts: a few requests
 * more than the limit after a machine crash. Counters are not records anyone is owed (the usage
 * ledger is, and the access store fsyncs it); an fsync per request would cost more than the
 * whole limiter. The fsyncs left are the WAL checkpoints' (every ~1000 pages written, a few
 * hundred admits): they are the slowest percent of admits, milliseconds on a busy disk.
 *
 * The clock is this process's: processes sharing the file share a machine, so one clock.
 */
export class SqliteRateLimiter implements RateLimiter {
  readonly #db: Connection;
  readonly #now: () => number;
  readonly #minuteMs: number;
  readonly #reservationTtlMs: number;
  readonly #statements: ReturnType<typeof prepareStatements>;
  readonly #admit: Transaction<(key: string, policy: LimitPolicy, tokens: number) => Admission>;
  readonly #settle: Transaction<(key: string, id: string, usedTokens: number) => void>;
  readonly #peek: Transaction<(key: string, policy: LimitPolicy) => LimitState>;
  /** The UTC day housekeeping last ran for: it runs once a day per process, in the first admit of the day. */
  #housekeptDay = -1;

  private constructor(db: Connection, options: SqliteRateLimiterOptions) {
    this.#db = db;
    this.#now = options.now ?? Date.now;
    this.#minuteMs = options.minuteMs ?? DEFAULT_MINUTE_MS;
    this.#reservationTtlMs = options.reservationTtlMs ?? DEFAULT_RESERVATION_TTL_MS;
    this.#statements = prepareStatements(db);
    this.#admit = db.transaction((key: string, policy: LimitPolicy, tokens: number) => this.#admitNow(key, policy, tokens));
    this.#settle = db.transaction((key: string, id: string, usedTokens: number) => this.#settleNow(key, id, usedTokens));
    this.#peek = db.transaction((key: string, policy: LimitPolicy) => {
      const figures = this.#figures(key, policy, this.#now());
      return stateOf(policy, figures);
    });
  }

  static open(file: string, options: SqliteRateLimiterOptions = {}): SqliteRateLimiter {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const db = new Database(file, { timeout: BUSY_TIMEOUT_MS });
    try {
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = NORMAL");
      migrateSqlite(db, SCHEMA_COMPONENT, MIGRATIONS);
      return new SqliteRateLimiter(db, options);
    } catch (error) {
      db.close();
      throw error;
    }
  }

  async admit(key: string, policy: LimitPolicy, tokens: number): Promise<Admission> {
    assertTokenCount(tokens);
    // IMMEDIATE: the write lock before the first read, so no other admit changes the counters between our check and our write.
    return this.#admit.immediate(key, policy, tokens);
  }

  /** Settling twice, or a reservation this file does not hold (expired and swept), changes nothing. */
  async settle(reservation: Reservation, usedTokens: number): Promise<void> {
    assertTokenCount(usedTokens);
    this.#settle.immediate(reservation.key, reservation.id, usedTokens);
  }

  async peek(key: string, policy: LimitPolicy): Promise<LimitState> {
    // A read transaction: the window and the day from one snapshot.
    return this.#peek.deferred(key, policy);
  }

  async close(): Promise<void> {
    this.#db.close();
  }

  #admitNow(key: string, policy: LimitPolicy, tokens: number): Admission {
    const now = this.#now();
    const day = utcDay(now);
    if (day !== this.#housekeptDay) this.#housekeep(now, day);
    this.#statements.pruneWindow.run(key, now - this.#minuteMs);
    const figures = this.#figures(key, policy, now);
    const refused = refusal(policy, figures, tokens);
    if (refused) {
      return { allowed: false, limit: refused.limit, retryAfterSeconds: retryAfterSeconds(refused.waitMs), state: stateOf(policy, figures) };
    }
    const id = randomUUID();
    this.#statements.logRequest.run(key, now, id);
    this.#statements.chargeDay.run(key, day, tokens);
    this.#statements.reserve.run(key, id, day, tokens, now);
    const after: Figures = {
      ...figures,
      windowCount: figures.windowCount + 1,
      windowWaitMs: this.#windowWaitMs(key, policy, now, figures.windowCount + 1),
      dayRequests: figures.dayRequests + 1,
      dayTokens: figures.dayTokens + tokens,
      open: figures.open + 1,
    };
    return { allowed: true, reservation: { key, id, tokens, at: now }, state: stateOf(policy, after) };
  }

  #settleNow(key: string, id: string, usedTokens: number): void {
    const held = this.#statements.findReservation.get(key, id);
    if (!held) return;
    // admit reserved the worst case; more is the caller's mistake, and counting it would take the
    // day past a limit that is promised never to be exceeded (the usage ledger has the real figure).
    const refund = held.tokens - Math.min(usedTokens, held.tokens);
    if (refund > 0) this.#statements.refundDay.run(refund, key, held.day);
    this.#statements.release.run(key, id);
  }

  /** Counts as of `now`, reading only rows inside the window and the reservation lifetime, so it needs no prior pruning (peek prunes nothing). */
  #figures(key: string, policy: LimitPolicy, now: number): Figures {
    const s = this.#statements;
    const windowCount = policy.requestsPerMinute === undefined ? 0 : s.countWindow.get(key, now - this.#minuteMs)!;
    const dayRow = s.dayRow.get(key, utcDay(now));
    return {
      now,
      windowCount,
      windowWaitMs: this.#windowWaitMs(key, policy, now, windowCount),
      dayRequests: dayRow?.requests ?? 0,
      dayTokens: dayRow?.tokens ?? 0,
      open: policy.concurrentRequests === undefined ? 0 : s.countOpen.get(key, now - this.#reservationTtlMs)!,
    };
  }

  /**
   * ms until the window gives back the unit that makes `remaining` grow (from 0 to 1 when full):
   * the request at position max(0, count − limit) in time order leaving it. 0 when the window is
   * empty; a whole window when the limit is 0 (nothing will ever fit, retry later anyway).
   */
  #windowWaitMs(key: string, policy: LimitPolicy, now: number, count: number): number {
    const limit = policy.requestsPerMinute;
    if (limit === undefined) return 0;
    const at = this.#statements.windowEntry.get(key, now - this.#minuteMs, Math.max(0, count - limit));
    if (at !== undefined) return at + this.#minuteMs - now;
    return count >= limit ? this.#minuteMs : 0;
  }

  /**
   * Sweeps what per-key pruning misses: windows and reservations of keys that went quiet, and day
   * rows older than yesterday (a reservation from yesterday may still settle today).
   */
  #housekeep(now: number, day: number): void {
    this.#statements.sweepWindows.run(now - this.#minuteMs);
    this.#statements.sweepReservations.run(now - this.#reservationTtlMs);
    this.#statements.sweepDays.run(day - 1);
    this.#housekeptDay = day;
  }
}

function prepareStatements(db: Connection) {
  return {
    pruneWindow: db.prepare<[string, number]>("DELETE FROM rate_requests WHERE key = ? AND at <= ?"),
    countWindow: db.prepare<[string, number], number>("SELECT count(*) FROM rate_requests WHERE key = ? AND at > ?").pluck(),
    windowEntry: db.prepare<[string, number, number], number>("SELECT at FROM rate_requests WHERE key = ? AND at > ? ORDER BY at LIMIT 1 OFFSET ?").pluck(),
    dayRow: db.prepare<[string, number], { requests: number; tokens: number }>("SELECT requests, tokens FROM rate_days WHERE key = ? AND day = ?"),
    countOpen: db.prepare<[string, number], number>("SELECT count(*) FROM rate_reservations WHERE key = ? AND at > ?").pluck(),
    logRequest: db.prepare<[string, number, string]>("INSERT INTO rate_requests (key, at, id) VALUES (?, ?, ?)"),
    chargeDay: db.prepare<[string, number, number]>(
      `INSERT INTO rate_days (key, day, requests, tokens) VALUES (?, ?, 1, ?)
       ON CONFLICT (key, day) DO UPDATE SET requests = requests + 1, tokens = tokens + excluded.tokens`,
    ),
    reserve: db.prepare<[string, string, number, number, number]>("INSERT INTO rate_reservations (key, id, day, tokens, at) VALUES (?, ?, ?, ?, ?)"),
    findReservation: db.prepare<[string, string], ReservationRow>("SELECT day, tokens FROM rate_reservations WHERE key = ? AND id = ?"),
    refundDay: db.prepare<[number, string, number]>("UPDATE rate_days SET tokens = tokens - ? WHERE key = ? AND day = ?"),
    release: db.prepare<[string, string]>("DELETE FROM rate_reservations WHERE key = ? AND id = ?"),
    sweepWindows: db.prepare<[number]>("DELETE FROM rate_requests WHERE at <= ?"),
    sweepReservations: db.prepare<[number]>("DELETE FROM rate_reservations WHERE at <= ?"),
    sweepDays: db.prepare<[number]>("DELETE FROM rate_days WHERE day < ?"),
  } satisfies Record<string, Statement<never[], unknown>>;
}

/**
 * The limit that refuses this request, if any. When several do, the one that lasts longest: the
 * request cannot pass before all of them allow it, so that is the honest Retry-After.
 */
function refusal(policy: LimitPolicy, figures: Figures, tokens: number): { limit: LimitName; waitMs: number } | undefined {
  const untilMidnight = msUntilUtcMidnight(figures.now);
  const { requestsPerDay, tokensPerDay, requestsPerMinute, concurrentRequests } = policy;
  const checks: [LimitName, boolean, number][] = [
    ["requests_per_day", requestsPerDay !== undefined && figures.dayRequests >= requestsPerDay, untilMidnight],
    ["tokens_per_day", tokensPerDay !== undefined && figures.dayTokens + tokens > tokensPerDay, untilMidnight],
    ["requests_per_minute", requestsPerMinute !== undefined && figures.windowCount >= requestsPerMinute, figures.windowWaitMs],
    ["concurrent_requests", concurrentRequests !== undefined && figures.open >= concurrentRequests, CONCURRENCY_RETRY_MS],
  ];
  let worst: { limit: LimitName; waitMs: number } | undefined;
  for (const [limit, violated, waitMs] of checks) {
    if (violated && (!worst || waitMs > worst.waitMs)) worst = { limit, waitMs };
  }
  return worst;
}

/**
 * `requests`: the sliding window; resetSeconds is until it next gives a unit back (0 when empty),
 * which on a refusal is the Retry-After. `tokens`: the UTC day; resetSeconds is until midnight.
 */
function stateOf(policy: LimitPolicy, figures: Figures): LimitState {
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
function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000));
}

function utcDay(ms: number): number {
  return Math.floor(ms / DAY_MS);
}

function msUntilUtcMidnight(ms: number): number {
  return (utcDay(ms) + 1) * DAY_MS - ms;
}

function assertTokenCount(tokens: number): void {
  if (!Number.isSafeInteger(tokens) || tokens < 0) throw new RangeError(`token count must be a non-negative integer, not ${tokens}`);
}

