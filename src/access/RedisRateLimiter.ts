import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { assertTokenCount, LEASE_MS, MINUTE_MS, RESERVATION_TTL_MS, retryAfterSeconds, stateOf } from "./limitFigures.js";
import type { LimiterTimings } from "./limitFigures.js";
import { LimiterUnavailableError } from "./RateLimiter.js";
import type { Admission, LimitName, LimitPolicy, LimitState, RateLimiter, Reservation } from "./RateLimiter.js";

export interface RedisRateLimiterOptions extends LimiterTimings {
  /** Prepended to every key, to share a Redis with other applications or isolate tests. */
  keyPrefix?: string;
  /** Bound on connecting and on each command: past it the operation fails with LimiterUnavailableError. */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 500;
const MAX_RECONNECT_DELAY_MS = 1_000;
const LIMIT_NAMES: readonly LimitName[] = ["requests_per_day", "tokens_per_day", "requests_per_minute", "concurrent_requests"];

/**
 * Lua shared by the scripts. Times are Redis's own (`TIME`), in ms, so replicas' clocks never
 * matter. Days are whole UTC days since the epoch; a key's day hash is `<base><day>`. The window
 * holds the requests with a score (admission time) in (now − minute, now]. A held reservation is
 * "<day>:<tokens>:<prompt tokens>:<holder>" (one from before holders were kept: "<day>:<tokens>").
 */
export const LIMITER_LUA = `
local DAY_MS = 86400000
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function utc_day(now) return math.floor(now / DAY_MS) end
local function day_key(base, now) return base .. utc_day(now) end
local function until_midnight(now) return (utc_day(now) + 1) * DAY_MS - now end
-- ms until the window gives back the unit that makes 'remaining' grow: the request at position
-- max(0, count - limit) leaving it. 0 when empty or unlimited; a whole window for a limit of 0.
local function window_wait(window, now, minute, count, limit)
  if limit < 0 then return 0 end
  local entry = redis.call('ZRANGEBYSCORE', window, '(' .. (now - minute), '+inf', 'WITHSCORES', 'LIMIT', math.max(0, count - limit), 1)
  if entry[2] then return tonumber(entry[2]) + minute - now end
  if count >= limit then return minute end
  return 0
end
local function day_counts(key)
  local row = redis.call('HMGET', key, 'requests', 'tokens')
  return tonumber(row[1] or 0), tonumber(row[2] or 0)
end
local function parse_held(entry)
  local day, tokens, prompt, holder = string.match(entry, '^(%d+):(%d+):?(%d*):?(.*)$')
  return day, tonumber(tokens), tonumber(prompt) or 0, holder
end
-- Replaces a reservation's tokens with the used ones (more too: see SqliteRateLimiter) in the day
-- it was admitted on, and frees its slot. 1, or 0 when there is no such open reservation.
local function settle_held(open, held, day_base, id, used)
  local entry = redis.call('HGET', held, id)
  if not entry then return 0 end
  local day, reserved = parse_held(entry)
  local refund = reserved - used
  local day_hash = day_base .. day
  -- An expired day hash stays expired: recreating it would make a counter without an expiry.
  if refund ~= 0 and redis.call('EXISTS', day_hash) == 1 then redis.call('HINCRBY', day_hash, 'tokens', -refund) end
  redis.call('HDEL', held, id)
  redis.call('ZREM', open, id)
  return 1
end
`;

/**
 * KEYS: window (sorted set: reservation id scored by admission time), open (sorted set: open
 * reservation ids by admission time), held (hash: reservation id → held entry).
 * ARGV: day key base, minute ms, reservation ttl ms, then the limits (−1: unlimited) requests per
 * minute, requests per day, tokens per day, concurrent requests, then tokens, reservation id,
 * prompt tokens, holder. Returns {allowed, limit index (1-based in LIMIT_NAMES) or 0, wait ms,
 * now, window count, window wait ms, day tokens}, the counts after the admission when allowed.
 */
const ADMIT_LUA = `${LIMITER_LUA}
local window, open, held = KEYS[1], KEYS[2], KEYS[3]
local minute, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local rpm, rpd, tpd, conc = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local tokens, id = tonumber(ARGV[8]), ARGV[9]
local now = clock()
local today = day_key(ARGV[1], now)

redis.call('ZREMRANGEBYSCORE', window, '-inf', now - minute)
for _, stale in ipairs(redis.call('ZRANGEBYSCORE', open, '-inf', now - ttl)) do redis.call('HDEL', held, stale) end
redis.call('ZREMRANGEBYSCORE', open, '-inf', now - ttl)
local count = redis.call('ZCARD', window)
local in_flight = redis.call('ZCARD', open)
local day_requests, day_tokens = day_counts(today)
local wait = window_wait(window, now, minute, count, rpm)

-- Several limits refusing: report the one lasting longest, the earliest the request could pass.
local refused, longest = 0, -1
local function check(index, violated, ms)
  if violated and ms > longest then refused, longest = index, ms end
end
check(1, rpd >= 0 and day_requests >= rpd, until_midnight(now))
check(2, tpd >= 0 and day_tokens + tokens > tpd, until_midnight(now))
check(3, rpm >= 0 and count >= rpm, wait)
check(4, conc >= 0 and in_flight >= conc, 1000)
if refused > 0 then return {0, refused, longest, now, count, wait, day_tokens} end

redis.call('ZADD', window, now, id)
redis.call('PEXPIRE', window, minute)
redis.call('HINCRBY', today, 'requests', 1)
redis.call('HINCRBY', today, 'tokens', ARGV[8])
-- Kept past midnight: a reservation from yesterday may still settle today.
redis.call('EXPIRE', today, 172800)
redis.call('ZADD', open, now, id)
redis.call('HSET', held, id, utc_day(now) .. ':' .. ARGV[8] .. ':' .. ARGV[10] .. ':' .. ARGV[11])
redis.call('PEXPIRE', open, ttl)
redis.call('PEXPIRE', held, ttl)
return {1, 0, 0, now, count + 1, window_wait(window, now, minute, count + 1, rpm), day_tokens + tokens}
`;

/** KEYS: open, held. ARGV: day key base, reservation id, used tokens. See settle_held. */
const SETTLE_LUA = `${LIMITER_LUA}
return settle_held(KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[3]))
`;

/** KEYS: open, held. ARGV: day key base, holder. Settles each of the holder's reservations at its prompt; returns how many. */
const RELEASE_LUA = `${LIMITER_LUA}
local released = 0
local entries = redis.call('HGETALL', KEYS[2])
for i = 1, #entries, 2 do
  local _, _, prompt, holder = parse_held(entries[i + 1])
  if holder == ARGV[2] then released = released + settle_held(KEYS[1], KEYS[2], ARGV[1], entries[i], prompt) end
end
return released
`;

/**
 * KEYS: leases (sorted set: holder → lease end, ms), instances (hash: holder → instance name).
 * ARGV: holder, lease ms, instance name ('' if none claimed). Renews the holder's lease; returns
 * the dead holders: leases that have run out, and earlier holders of the same instance name.
 */
const HEARTBEAT_LUA = `${LIMITER_LUA}
local me, instance = ARGV[1], ARGV[3]
local now = clock()
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), me)
if instance ~= '' then redis.call('HSET', KEYS[2], me, instance) end
local dead = {}
for _, holder in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  if holder ~= me then table.insert(dead, holder) end
end
if instance ~= '' then
  local claimed = redis.call('HGETALL', KEYS[2])
  for i = 1, #claimed, 2 do
    if claimed[i] ~= me and claimed[i + 1] == instance then table.insert(dead, claimed[i]) end
  end
end
return dead
`;

/** KEYS: window. ARGV: day key base, minute ms, requests per minute (−1: unlimited). Writes nothing. Returns {now, window count, window wait ms, day tokens}. */
const PEEK_LUA = `${LIMITER_LUA}
local minute, rpm = tonumber(ARGV[2]), tonumber(ARGV[3])
local now = clock()
local count = redis.call('ZCOUNT', KEYS[1], '(' .. (now - minute), '+inf')
local _, day_tokens = day_counts(day_key(ARGV[1], now))
return {now, count, window_wait(KEYS[1], now, minute, count, rpm), day_tokens}
`;

/** The scripts as ioredis's defineCommand attaches them (EVALSHA, falling back to EVAL after a Redis restart). */
interface LimiterCommands {
  limiterAdmit(...args: (string | number)[]): Promise<unknown>;
  limiterSettle(...args: (string | number)[]): Promise<unknown>;
  limiterRelease(...args: (string | number)[]): Promise<unknown>;
  limiterHeartbeat(...args: (string | number)[]): Promise<unknown>;
  limiterPeek(...args: (string | number)[]): Promise<unknown>;
}

type LimiterRedis = Redis & LimiterCommands;

/**
 * The rate limiter in Redis, for several replicas: every operation is one Lua script, and Redis
 * runs scripts one at a time, so each admit reads and updates a key's counters atomically (Redis
 * 5 or later: scripts that write after reading TIME are replicated by their effects). Keys, for a
 * limiter key K (the braces are a hash tag: one key's data would share a slot in Redis Cluster,
 * where the day key, named in the script from Redis's clock, must live beside the declared ones):
 * - `<prefix>{K}:window`: sorted set, the sliding window's requests (id → admission ms);
 * - `<prefix>{K}:day:<day>`: hash {requests, tokens} of UTC day <day>, expiring after 2 days;
 * - `<prefix>{K}:open`: sorted set, open reservations (id → admission ms), for concurrency;
 * - `<prefix>{K}:reservations`: hash, id → held entry (see LIMITER_LUA), for settle.
 * The window and reservation keys expire once nothing in them can count any more. For holders
 * (RateLimiter), scripts of their own, each on keys of one slot:
 * - `<prefix>leases`: sorted set, holder → end of its lease (Redis's clock, ms);
 * - `<prefix>instances`: hash, holder → the instance name it claimed;
 * - `<prefix>holder:<H>:keys`: sorted set, the limiter keys holder H admitted into (→ when, by
 *   H's clock), so that its reservations can be found once it is dead. H lists K before admitting
 *   into K (a crash between the two leaves an entry without a reservation: harmless) and prunes
 *   what is older than two reservation lifetimes at each heartbeat.
 *
 * Failure: the client never queues commands while disconnected and bounds every command, so
 * when Redis is down or hung, `admit` and `peek` reject with LimiterUnavailableError within
 * `timeoutMs` (503, fail closed). `settle` rejects the same way; its caller logs that rather than
 * failing a response already produced, and the reservation then keeps its worst case and its
 * slot until it expires.
 */
export class RedisRateLimiter implements RateLimiter {
  readonly #redis: LimiterRedis;
  readonly #minuteMs: number;
  readonly #keyPrefix: string;
  readonly #reservationTtlMs: number;
  readonly #leaseMs: number;
  /** This holder: random per limiter, so per server process. */
  readonly #holder = randomUUID();
  /** The instance name claimed, or "" until then. */
  #instance = "";
  /**
   * When this holder last listed each key in its index (its clock). An entry listed at s is kept
   * until s + 2 × TTL, so a key listed within the last TTL needs no listing again: each of its
   * reservations ends (settled, or its slot expired) within a TTL. Saves a command on most admits.
   */
  readonly #listed = new Map<string, number>();

  private constructor(redis: LimiterRedis, options: RedisRateLimiterOptions) {
    this.#redis = redis;
    this.#minuteMs = options.minuteMs ?? MINUTE_MS;
    this.#keyPrefix = options.keyPrefix ?? "modelhost:rl:";
    this.#reservationTtlMs = options.reservationTtlMs ?? RESERVATION_TTL_MS;
    this.#leaseMs = options.leaseMs ?? LEASE_MS;
  }

  /**
   * Connects and starts holding (its lease taken, dead holders' reservations released) first, so a
   * server started with Redis down fails at startup, not on its first request.
   */
  static async connect(url: string, options: RedisRateLimiterOptions = {}): Promise<RedisRateLimiter> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const redis = new Redis(url, {
      lazyConnect: true,
      // While disconnected, fail at once instead of queueing until Redis returns.
      enableOfflineQueue: false,
      // A command caught by a dropped connection is retried once, still within commandTimeout.
      maxRetriesPerRequest: 1,
      connectTimeout: timeoutMs,
      commandTimeout: timeoutMs,
      // Keep reconnecting, soon: requests fail closed until Redis is back.
      retryStrategy: (attempt) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
    });
    // Connection errors reach callers as rejected commands; without a listener ioredis would also
    // print every failed reconnection attempt.
    redis.on("error", () => undefined);
    redis.defineCommand("limiterAdmit", { numberOfKeys: 3, lua: ADMIT_LUA });
    redis.defineCommand("limiterSettle", { numberOfKeys: 2, lua: SETTLE_LUA });
    redis.defineCommand("limiterRelease", { numberOfKeys: 2, lua: RELEASE_LUA });
    redis.defineCommand("limiterHeartbeat", { numberOfKeys: 2, lua: HEARTBEAT_LUA });
    redis.defineCommand("limiterPeek", { numberOfKeys: 1, lua: PEEK_LUA });
    const limiter = new RedisRateLimiter(redis as LimiterRedis, options);
    try {
      await redis.connect();
      await limiter.heartbeat();
    } catch (error) {
      redis.disconnect();
      throw error instanceof LimiterUnavailableError ? error : new LimiterUnavailableError(error);
    }
    return limiter;
  }

  async admit(key: string, policy: LimitPolicy, tokens: number, promptTokens = 0): Promise<Admission> {
    assertTokenCount(tokens, promptTokens);
    const keys = this.#keys(key);
    const id = randomUUID();
    const limits = [policy.requestsPerMinute, policy.requestsPerDay, policy.tokensPerDay, policy.concurrentRequests].map(
      (limit) => limit ?? -1,
    );
    let reply: unknown;
    try {
      // Sent on one connection, so the key is listed before the reservation exists.
      const listed = this.#list(key);
      const admitted = this.#redis.limiterAdmit(
        keys.window,
        keys.open,
        keys.held,
        keys.dayBase,
        this.#minuteMs,
        this.#reservationTtlMs,
        ...limits,
        tokens,
        id,
        promptTokens,
        this.#holder,
      );
      [, reply] = await Promise.all([listed, admitted]);
    } catch (error) {
      // A timed-out script was sent and may still run once a stalled Redis resumes, reserving for
      // a request that was refused: its reservation would hold a concurrency slot until it expired.
      // Release it; sent on the same connection, the release runs after the admit.
      this.#redis.limiterSettle(keys.open, keys.held, keys.dayBase, id, 0).catch(() => undefined);
      throw new LimiterUnavailableError(error);
    }
    const figures = readReply(reply, ["allowed", "refused", "waitMs", "now", "windowCount", "windowWaitMs", "dayTokens"]);
    const state = stateOf(policy, figures);
    if (figures.allowed === 1) return { allowed: true, reservation: { key, id, tokens, at: figures.now }, state };
    const limit = LIMIT_NAMES[figures.refused - 1];
    if (!limit) throw new LimiterUnavailableError(`unexpected reply ${JSON.stringify(reply)}`);
    return { allowed: false, limit, retryAfterSeconds: retryAfterSeconds(figures.waitMs), state };
  }

  /** Settling twice, or a reservation that expired or was released as its holder's, changes nothing. Rejects when Redis fails: the caller logs it. */
  async settle(reservation: Reservation, usedTokens: number): Promise<void> {
    assertTokenCount(usedTokens);
    const keys = this.#keys(reservation.key);
    await unavailableOnFailure(this.#redis.limiterSettle(keys.open, keys.held, keys.dayBase, reservation.id, usedTokens));
  }

  async peek(key: string, policy: LimitPolicy): Promise<LimitState> {
    const keys = this.#keys(key);
    const reply = await unavailableOnFailure(
      this.#redis.limiterPeek(keys.window, keys.dayBase, this.#minuteMs, policy.requestsPerMinute ?? -1),
    );
    return stateOf(policy, readReply(reply, ["now", "windowCount", "windowWaitMs", "dayTokens"]));
  }

  /**
   * Renews the lease, then releases each dead holder's reservations key by key and forgets it.
   * Two holders releasing the same dead one at once is harmless: a reservation is settled once.
   */
  async heartbeat(): Promise<void> {
    const { leases, instances } = this.#holderRegistry();
    const mine = this.#holderKeys(this.#holder);
    const [dead] = await unavailableOnFailure(
      Promise.all([
        this.#redis.limiterHeartbeat(leases, instances, this.#holder, this.#leaseMs, this.#instance),
        this.#redis.zremrangebyscore(mine, "-inf", String(this.#forgetListedBefore(Date.now() - 2 * this.#reservationTtlMs))),
      ]),
    );
    if (!Array.isArray(dead)) throw new LimiterUnavailableError(`unexpected reply ${JSON.stringify(dead)}`);
    for (const holder of new Set(dead.map(String))) {
      const holderKeys = this.#holderKeys(holder);
      const keys = await unavailableOnFailure(this.#redis.zrange(holderKeys, "0", "-1"));
      for (const key of keys) {
        const { open, held, dayBase } = this.#keys(key);
        await unavailableOnFailure(this.#redis.limiterRelease(open, held, dayBase, holder));
      }
      await unavailableOnFailure(
        Promise.all([this.#redis.zrem(leases, holder), this.#redis.hdel(instances, holder), this.#redis.del(holderKeys)]),
      );
    }
  }

  async claimInstance(name: string): Promise<void> {
    this.#instance = name;
    await this.heartbeat();
  }

  /** Ends the lease (what is left unsettled is then another holder's to release), then waits for replies still due, unless Redis is gone. */
  async close(): Promise<void> {
    try {
      await this.#redis.zadd(this.#holderRegistry().leases, 0, this.#holder);
      await this.#redis.quit();
    } catch {
      this.#redis.disconnect();
    }
  }

  /** Lists `key` in this holder's index, unless listed recently enough (see #listed). */
  async #list(key: string): Promise<void> {
    const now = Date.now();
    const listed = this.#listed.get(key);
    if (listed !== undefined && now - listed < this.#reservationTtlMs) return;
    this.#listed.set(key, now);
    try {
      await this.#redis.zadd(this.#holderKeys(this.#holder), now, key);
    } catch (error) {
      this.#listed.delete(key);
      throw error;
    }
  }

  /** Forgets the listings made before `cutoff`, as the index in Redis is about to; returns it. */
  #forgetListedBefore(cutoff: number): number {
    for (const [key, at] of this.#listed) if (at < cutoff) this.#listed.delete(key);
    return cutoff;
  }

  #keys(key: string) {
    const base = `${this.#keyPrefix}{${key}}:`;
    return { window: `${base}window`, open: `${base}open`, held: `${base}reservations`, dayBase: `${base}day:` };
  }

  #holderRegistry() {
    return { leases: `${this.#keyPrefix}leases`, instances: `${this.#keyPrefix}instances` };
  }

  #holderKeys(holder: string): string {
    return `${this.#keyPrefix}holder:${holder}:keys`;
  }
}

/** Any failure to get an answer, connection, timeout or script error alike, is the limiter being unavailable. */
async function unavailableOnFailure<T>(reply: Promise<T>): Promise<T> {
  try {
    return await reply;
  } catch (error) {
    throw new LimiterUnavailableError(error);
  }
}

/** A script's reply, an array of integers, named in order. */
function readReply<const Names extends readonly string[]>(reply: unknown, names: Names): Record<Names[number], number> {
  if (!Array.isArray(reply) || reply.length !== names.length || !reply.every((value) => typeof value === "number")) {
    throw new LimiterUnavailableError(`unexpected reply ${JSON.stringify(reply)}`);
  }
  return Object.fromEntries(names.map((name, index) => [name, reply[index]])) as Record<Names[number], number>;
}
