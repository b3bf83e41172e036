import type { AdmissionRequest, AdmissionTicket } from "../core/Engine.js";
import { ServerError } from "../core/ServerError.js";
import { PLAYGROUND_LEDGER_ID, type AccessStore, type AccessToken, type Account, type UsageRow } from "./AccessStore.js";
import { HEARTBEAT_MS } from "./limitFigures.js";
import { LimiterUnavailableError } from "./RateLimiter.js";
import type { LimitName, LimitState, RateLimiter } from "./RateLimiter.js";
import { resolveLimits, type Endpoint, type TiersConfig } from "./tiers.js";
import { hashToken, isWellFormedToken, tokensEqual } from "./tokenFormat.js";
import { UsageBuffer, type LedgerBacklog } from "./UsageBuffer.js";

/** Who is calling: the account, and the token it presented (null: signed in to the playground with a session). */
export interface Caller {
  account: Account;
  token: AccessToken | null;
}

export interface GateLogger {
  error(object: object, message: string): void;
}

/** How often token last-used times are written: per request would be a write per request. */
const TOUCH_INTERVAL_MS = 5_000;

/**
 * The hosted profile's door: checks personal access tokens, applies the caller's tier limits
 * around each request, and writes the usage ledger when a request ends.
 */
export class AccessGate {
  readonly #store: AccessStore;
  readonly #limiter: RateLimiter;
  readonly #tiers: TiersConfig;
  readonly #logger: GateLogger;
  readonly #now: () => number;
  readonly #touched = new Map<string, number>();
  readonly #usage: UsageBuffer;
  readonly #touchTimer: NodeJS.Timeout;
  readonly #heartbeatTimer: NodeJS.Timeout;

  constructor(store: AccessStore, limiter: RateLimiter, tiers: TiersConfig, options: { logger: GateLogger; now?: () => number }) {
    this.#store = store;
    this.#limiter = limiter;
    this.#tiers = tiers;
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
    this.#usage = new UsageBuffer(store, (error) => this.#logger.error({ err: error }, "usage ledger write failed"));
    this.#touchTimer = setInterval(() => void this.#flushTouches(), TOUCH_INTERVAL_MS);
    this.#touchTimer.unref();
    // Keeps this server's reservations its own, and releases those of servers that died.
    this.#heartbeatTimer = setInterval(
      () => void this.#limiter.heartbeat().catch((error: unknown) => this.#logger.error({ err: error }, "rate limiter heartbeat failed")),
      HEARTBEAT_MS,
    );
    this.#heartbeatTimer.unref();
  }

  /**
   * The caller behind an `Authorization: Bearer …` header. Missing, malformed, unknown, expired,
   * revoked or disabled-account credentials are all the same 401, which never echoes the token.
   */
  async authenticate(authorization: string | undefined): Promise<Caller> {
    const presented = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "")?.[1];
    // A mistyped token fails its checksum here, without a database lookup.
    if (!presented || !isWellFormedToken(presented)) throw invalidKey();
    const hash = hashToken(presented);
    const found = await this.#store.findTokenByHash(hash);
    if (!found) throw invalidKey();
    const { token, account } = found;
    const now = this.#now();
    const usable =
      tokensEqual(found.hash, hash) && token.revokedAt === null && (token.expiresAt === null || token.expiresAt > now) && !account.disabled;
    if (!usable) throw invalidKey();
    this.#touched.set(token.id, now);
    return { account, token };
  }

  /**
   * Applies the caller's limits to one request whose size is known: refuses (413, 429, or 503
   * when the limiter cannot be reached: fail closed) or returns a ticket to settle at the end.
   * `onState` receives the limit state for the x-ratelimit-* headers, refused or not.
   */
  async admit(
    caller: Caller,
    model: string,
    endpoint: Endpoint,
    request: AdmissionRequest,
    onState: (state: LimitState) => void,
  ): Promise<AdmissionTicket> {
    const limits = resolveLimits(this.#tiers, caller.account.id, caller.account.tier, { endpoint, model });
    if (limits.maxInputTokens !== undefined && request.promptTokens > limits.maxInputTokens) {
      throw new ServerError("tokens_limit_reached", {
        message: `Request too large: the prompt has ${request.promptTokens} tokens, and your tier allows ${limits.maxInputTokens} per request.`,
      });
    }
    const maxOutputTokens = Math.min(request.maxOutputTokens, limits.maxOutputTokens ?? Infinity);
    const admission = await this.#unlessUnavailable(
      this.#limiter.admit(limits.key, limits.policy, request.promptTokens + maxOutputTokens, request.promptTokens),
    );
    onState(admission.state);
    if (!admission.allowed)
      throw rateLimited(admission.limit, admission.retryAfterSeconds, admission.state, request.promptTokens + maxOutputTokens);

    const { reservation } = admission;
    const day = new Date(reservation.at).toISOString().slice(0, 10);
    let settled = false;
    return {
      maxOutputTokens,
      settle: (usage) => {
        if (settled) return;
        settled = true;
        const used = usage.promptTokens + usage.completionTokens;
        this.#limiter.settle(reservation, used).catch((error: unknown) => this.#logger.error({ err: error }, "rate limiter settle failed"));
        this.#usage.add({
          accountId: caller.account.id,
          tokenId: caller.token?.id ?? PLAYGROUND_LEDGER_ID,
          model,
          day,
          requests: 1,
          ...usage,
        });
      },
    };
  }

  /** The usage ledger's backlog: rows not yet written, and how long the oldest has waited. */
  ledgerBacklog(): LedgerBacklog {
    return this.#usage.backlog();
  }

  /** The caller's account's ledger rows since a day (YYYY-MM-DD). */
  usage(caller: Caller, since: string): Promise<UsageRow[]> {
    return this.#store.usage({ accountId: caller.account.id, since });
  }

  /**
   * The caller's limits as they stand, for responses that consume nothing: those a chat request to
   * a model no override names is held to (the tier's own, or its `@chat` group's).
   */
  async state(caller: Caller): Promise<LimitState> {
    const { key, policy } = resolveLimits(this.#tiers, caller.account.id, caller.account.tier, { endpoint: "chat" });
    return this.#unlessUnavailable(this.#limiter.peek(key, policy));
  }

  /**
   * Names this server to the limiter (host and listening address) once it listens: the
   * reservations this instance left unsettled before a restart are released at once. Should the
   * limiter fail now, they are released when their lease runs out instead: this only logs.
   */
  async claimInstance(name: string): Promise<void> {
    await this.#limiter
      .claimInstance(name)
      .catch((error: unknown) => this.#logger.error({ err: error }, "rate limiter instance claim failed"));
  }

  async close(): Promise<void> {
    clearInterval(this.#touchTimer);
    clearInterval(this.#heartbeatTimer);
    await Promise.all([this.#flushTouches(), this.#usage.flush()]);
  }

  /** The limiter's answer; its being unavailable is a 503 (fail closed). Anything else it throws is a bug, and stays one. */
  async #unlessUnavailable<T>(answer: Promise<T>): Promise<T> {
    try {
      return await answer;
    } catch (error) {
      if (!(error instanceof LimiterUnavailableError)) throw error;
      this.#logger.error({ err: error }, "rate limiter unavailable");
      throw new ServerError("limiter_unavailable", { retryAfter: 1, cause: error });
    }
  }

  async #flushTouches(): Promise<void> {
    if (this.#touched.size === 0) return;
    const batch = new Map(this.#touched);
    this.#touched.clear();
    await this.#store.touchTokens(batch).catch((error: unknown) => this.#logger.error({ err: error }, "token last-used write failed"));
  }
}

function invalidKey(): ServerError {
  return new ServerError("invalid_api_key");
}

function rateLimited(limit: LimitName, retryAfter: number, state: LimitState, wanted: number): ServerError {
  const messages: Record<LimitName, string> = {
    requests_per_minute: `Rate limit reached for requests per minute (${state.requests?.limit ?? "?"}). Please wait one minute before trying again.`,
    requests_per_day: `Rate limit reached for requests per day. Retry after midnight UTC, in ${retryAfter} s.`,
    tokens_per_day: `Rate limit reached for tokens per day (${state.tokens?.limit ?? "?"}; ${state.tokens?.remaining ?? 0} left, this request may use ${wanted}: its prompt plus max_tokens). Retry after midnight UTC, in ${retryAfter} s, or lower max_tokens.`,
    concurrent_requests: "Too many requests at once for your tier. Retry when one of them has finished.",
  };
  return new ServerError("rate_limit_exceeded", {
    retryAfter,
    message: messages[limit],
    limitKind: limit === "tokens_per_day" ? "tokens" : "requests",
    limit,
  });
}
