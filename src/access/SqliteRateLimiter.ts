import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import type { Database as Connection, Statement, Transaction } from "better-sqlite3";
import {
  assertTokenCount,
  CONCURRENCY_RETRY_MS,
  LEASE_MS,
  MINUTE_MS,
  msUntilUtcMidnight,
  RESERVATION_TTL_MS,
  retryAfterSeconds,
  stateOf,
  utcDay,
} from "./limitFigures.js";
import type { Figures, LimiterTimings } from "./limitFigures.js";
import { LimiterUnavailableError } from "./RateLimiter.js";
import type { Admission, LimitName, LimitPolicy, LimitState, RateLimiter, Reservation } from "./RateLimiter.js";
import { openSqlite } from "../db/migrateSqlite.js";

export interface SqliteRateLimiterOptions extends LimiterTimings {
  /** The clock (ms since the epoch); tests move it instead of sleeping. */
  now?: () => number;
}

/** Long enough for another process's commit (tens of µs) or checkpoint; short, as the wait blocks the event loop. */
const BUSY_TIMEOUT_MS = 2_000;
/**
 * SQLite failing to use the file (locked past the busy timeout, disk full or failing, read-only):
 * the limiter is unavailable. Any other SqliteError (a constraint, misused SQL) is a bug.
 */
const UNAVAILABLE_CODES = /^SQLITE_(BUSY|LOCKED|IOERR|FULL|READONLY|CANTOPEN|PROTOCOL)/;

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
  `-- holder: the limiter instance (a server process) that admitted the reservation; prompt_tokens:
   -- what it is charged if that holder dies before settling it. Found by a scan of the whole table
   -- (open reservations only: a few hundred at most), so no index costs every admit a page write.
   -- Reservations from before this migration have neither: their holder holds no lease, so the
   -- next heartbeat releases them, charging nothing.
   ALTER TABLE rate_reservations ADD COLUMN holder TEXT NOT NULL DEFAULT '';
   ALTER TABLE rate_reservations ADD COLUMN prompt_tokens INTEGER NOT NULL DEFAULT 0;

   -- One row per live holder: its lease, renewed by its heartbeats, and the instance it claimed.
   CREATE TABLE rate_holders (
     holder TEXT PRIMARY KEY,
     instance TEXT,
     lease_until INTEGER NOT NULL
   ) STRICT, WITHOUT ROWID;`,
];

/**
 * One key's counters at one instant: everything a decision and the reported state depend on. The
 * window and the open reservations are only counted when the policy limits them (0 otherwise).
 */
interface KeyFigures extends Figures {
  dayRequests: number;
  /** Unexpired open reservations. */
  open: number;
}

interface ReservationRow {
  day: number;
  tokens: number;
}

/** A reservation whose holder is dead, and what it is charged. */
interface OrphanRow {
  key: string;
  id: string;
  prompt_tokens: number;
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
 * The clock is this process's: processes sharing the file share a machine, so one clock. Each
 * limiter is a holder (RateLimiter): its lease is a row of `rate_holders`, written when it opens.
 */
export class SqliteRateLimiter implements RateLimiter {
  readonly #db: Connection;
  readonly #now: () => number;
  readonly #minuteMs: number;
  readonly #reservationTtlMs: number;
  readonly #leaseMs: number;
  /** This holder: random per limiter, so per server process. */
  readonly #holder = randomUUID();
  /** The instance name claimed, or null until then. */
  #instance: string | null = null;
  readonly #statements: ReturnType<typeof prepareStatements>;
  readonly #admit: Transaction<(key: string, policy: LimitPolicy, tokens: number, promptTokens: number) => Admission>;
  readonly #settle: Transaction<(key: string, id: string, usedTokens: number) => void>;
  readonly #peek: Transaction<(key: string, policy: LimitPolicy) => LimitState>;
  readonly #heartbeat: Transaction<() => void>;
  /** The UTC day housekeeping last ran for: it runs once a day per process, in the first admit of the day. */
  #housekeptDay = -1;

  private constructor(db: Connection, options: SqliteRateLimiterOptions) {
    this.#db = db;
    this.#now = options.now ?? Date.now;
    this.#minuteMs = options.minuteMs ?? MINUTE_MS;
    this.#reservationTtlMs = options.reservationTtlMs ?? RESERVATION_TTL_MS;
    this.#leaseMs = options.leaseMs ?? LEASE_MS;
    this.#statements = prepareStatements(db);
    this.#admit = db.transaction((key: string, policy: LimitPolicy, tokens: number, promptTokens: number) =>
      this.#admitNow(key, policy, tokens, promptTokens),
    );
    this.#settle = db.transaction((key: string, id: string, usedTokens: number) => this.#settleNow(key, id, usedTokens));
    this.#peek = db.transaction((key: string, policy: LimitPolicy) => {
      const figures = this.#figures(key, policy, this.#now());
      return stateOf(policy, figures);
    });
    this.#heartbeat = db.transaction(() => this.#heartbeatNow());
  }

  /** Opens the limiter in `file`, and starts holding: its lease taken, dead holders' reservations released. */
  static open(file: string, options: SqliteRateLimiterOptions = {}): SqliteRateLimiter {
    const sqlite = { component: SCHEMA_COMPONENT, migrations: MIGRATIONS, busyTimeoutMs: BUSY_TIMEOUT_MS, synchronous: "NORMAL" } as const;
    return openSqlite(file, sqlite, (db) => {
      const limiter = new SqliteRateLimiter(db, options);
      limiter.#heartbeat.immediate();
      return limiter;
    });
  }

  async admit(key: string, policy: LimitPolicy, tokens: number, promptTokens = 0): Promise<Admission> {
    assertTokenCount(tokens, promptTokens);
    // IMMEDIATE: the write lock before the first read, so no other admit changes the counters between our check and our write.
    return unavailableOnFailure(() => this.#admit.immediate(key, policy, tokens, promptTokens));
  }

  /** Settling twice, or a reservation this file does not hold (expired, or released as its holder's), changes nothing. */
  async settle(reservation: Reservation, usedTokens: number): Promise<void> {
    assertTokenCount(usedTokens);
    unavailableOnFailure(() => this.#settle.immediate(reservation.key, reservation.id, usedTokens));
  }

  async peek(key: string, policy: LimitPolicy): Promise<LimitState> {
    // A read transaction: the window and the day from one snapshot.
    return unavailableOnFailure(() => this.#peek.deferred(key, policy));
  }

  async heartbeat(): Promise<void> {
    unavailableOnFailure(() => this.#heartbeat.immediate());
  }

  async claimInstance(name: string): Promise<void> {
    this.#instance = name;
    await this.heartbeat();
  }

  async close(): Promise<void> {
    if (!this.#db.open) return;
    try {
      this.#statements.endLease.run(this.#holder);
    } finally {
      this.#db.close();
    }
  }

  #admitNow(key: string, policy: LimitPolicy, tokens: number, promptTokens: number): Admission {
    const now = this.#now();
    const day = utcDay(now);
    if (day !== this.#housekeptDay) this.#housekeep(now, day);
    this.#statements.pruneWindow.run(key, now - this.#minuteMs);
    const figures = this.#figures(key, policy, now);
    const refused = refusal(policy, figures, tokens);
    if (refused) {
      return {
        allowed: false,
        limit: refused.limit,
        retryAfterSeconds: retryAfterSeconds(refused.waitMs),
        state: stateOf(policy, figures),
      };
    }
    const id = randomUUID();
    this.#statements.logRequest.run(key, now, id);
    this.#statements.chargeDay.run(key, day, tokens);
    this.#statements.reserve.run({ key, id, day, tokens, at: now, holder: this.#holder, promptTokens });
    const after: KeyFigures = {
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
    // What was used replaces what was reserved, also when it is more: a model served by an upstream
    // server reserves an estimate of its prompt (the upstream counts it), and the upstream's count
    // (the ledger's) is what the day's budget must hold, or a prompt 3 times its estimate would be
    // charged a third. The day then passes its limit by the estimate's error, and the next request
    // is refused. A model run here reserves its exact prompt and output cap, so never uses more.
    const refund = held.tokens - usedTokens;
    if (refund !== 0) this.#statements.refundDay.run(refund, key, held.day);
    this.#statements.release.run(key, id);
  }

  /** Renews this holder's lease; settles every reservation of a dead holder at its prompt, and forgets the dead. */
  #heartbeatNow(): void {
    const now = this.#now();
    const holders = { holder: this.#holder, instance: this.#instance, now };
    this.#statements.renewLease.run({ ...holders, until: now + this.#leaseMs });
    for (const orphan of this.#statements.orphans.all(holders)) this.#settleNow(orphan.key, orphan.id, orphan.prompt_tokens);
    this.#statements.forgetDead.run(holders);
  }

  /** Counts as of `now`, reading only rows inside the window and the reservation lifetime, so it needs no prior pruning (peek prunes nothing). */
  #figures(key: string, policy: LimitPolicy, now: number): KeyFigures {
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

/** This holder, the instance it claimed, and the time: what tells live holders from dead ones. */
interface Holders {
  holder: string;
  instance: string | null;
  now: number;
}

function prepareStatements(db: Connection) {
  return {
    pruneWindow: db.prepare<[string, number]>("DELETE FROM rate_requests WHERE key = ? AND at <= ?"),
    countWindow: db.prepare<[string, number], number>("SELECT count(*) FROM rate_requests WHERE key = ? AND at > ?").pluck(),
    windowEntry: db
      .prepare<[string, number, number], number>("SELECT at FROM rate_requests WHERE key = ? AND at > ? ORDER BY at LIMIT 1 OFFSET ?")
      .pluck(),
    dayRow: db.prepare<[string, number], { requests: number; tokens: number }>(
      "SELECT requests, tokens FROM rate_days WHERE key = ? AND day = ?",
    ),
    countOpen: db.prepare<[string, number], number>("SELECT count(*) FROM rate_reservations WHERE key = ? AND at > ?").pluck(),
    logRequest: db.prepare<[string, number, string]>("INSERT INTO rate_requests (key, at, id) VALUES (?, ?, ?)"),
    chargeDay: db.prepare<[string, number, number]>(
      `INSERT INTO rate_days (key, day, requests, tokens) VALUES (?, ?, 1, ?)
       ON CONFLICT (key, day) DO UPDATE SET requests = requests + 1, tokens = tokens + excluded.tokens`,
    ),
    reserve: db.prepare<[{ key: string; id: string; day: number; tokens: number; at: number; holder: string; promptTokens: number }]>(
      "INSERT INTO rate_reservations (key, id, day, tokens, at, holder, prompt_tokens) VALUES (@key, @id, @day, @tokens, @at, @holder, @promptTokens)",
    ),
    findReservation: db.prepare<[string, string], ReservationRow>("SELECT day, tokens FROM rate_reservations WHERE key = ? AND id = ?"),
    refundDay: db.prepare<[number, string, number]>("UPDATE rate_days SET tokens = tokens - ? WHERE key = ? AND day = ?"),
    release: db.prepare<[string, string]>("DELETE FROM rate_reservations WHERE key = ? AND id = ?"),
    sweepWindows: db.prepare<[number]>("DELETE FROM rate_requests WHERE at <= ?"),
    sweepReservations: db.prepare<[number]>("DELETE FROM rate_reservations WHERE at <= ?"),
    sweepDays: db.prepare<[number]>("DELETE FROM rate_days WHERE day < ?"),
    renewLease: db.prepare<[{ holder: string; instance: string | null; until: number }]>(
      `INSERT INTO rate_holders (holder, instance, lease_until) VALUES (@holder, @instance, @until)
       ON CONFLICT (holder) DO UPDATE SET instance = excluded.instance, lease_until = excluded.lease_until`,
    ),
    // Dead: a lease that has run out or was never taken, or an earlier holder of this instance's name.
    orphans: db.prepare<[Holders], OrphanRow>(
      `SELECT key, id, prompt_tokens FROM rate_reservations r WHERE holder != @holder AND NOT EXISTS (
         SELECT 1 FROM rate_holders h WHERE h.holder = r.holder AND h.lease_until > @now AND (@instance IS NULL OR h.instance IS NOT @instance))`,
    ),
    forgetDead: db.prepare<[Holders]>(
      "DELETE FROM rate_holders WHERE holder != @holder AND (lease_until <= @now OR (@instance IS NOT NULL AND instance = @instance))",
    ),
    endLease: db.prepare<[string]>("DELETE FROM rate_holders WHERE holder = ?"),
  } satisfies Record<string, Statement<never[], unknown>>;
}

/**
 * The limit that refuses this request, if any. When several do, the one that lasts longest: the
 * request cannot pass before all of them allow it, so that is the honest Retry-After.
 */
function refusal(policy: LimitPolicy, figures: KeyFigures, tokens: number): { limit: LimitName; waitMs: number } | undefined {
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

/** Runs a statement or transaction; SQLite failing to use the file is the limiter being unavailable. */
function unavailableOnFailure<T>(run: () => T): T {
  try {
    return run();
  } catch (error) {
    if (error instanceof Database.SqliteError && UNAVAILABLE_CODES.test(error.code)) throw new LimiterUnavailableError(error);
    throw error;
  }
}
