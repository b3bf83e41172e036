import { createHash, randomBytes } from "node:crypto";
import { ServerError } from "../core/ServerError.js";
import { AccessError, accountNotFound } from "./AccessError.js";
import type { AccessStore, Account, Session } from "./AccessStore.js";
import { burnPasswordCheck, hashPassword, MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, verifyPassword } from "./passwords.js";

/** A one-time sign-in link works for 15 minutes (issue 13), and once. */
const SIGN_IN_LINK_TTL_MS = 15 * 60_000;

/**
 * Failed sign-ins allowed in any 15 minutes: 5 per account name (an online guesser gets 480 tries
 * a day per account, nothing against a password of 8 random characters), and 20 per client
 * address (a user of several accounts behind one NAT may mistype a few times; one address cannot
 * spray a common password over many accounts). A refused attempt is not counted, so a locked-out
 * user is back after the window, not later. Anyone may lock an account's sign-in out for 15
 * minutes this way; its tokens keep working.
 *
 * An attempt is counted BEFORE its password is checked, atomically in the store (so on every
 * replica), and uncounted if it succeeds: parallel guesses cannot all pass the check before the
 * first of them has failed, and at most 5 hashes per account (20 per address) are ever waiting for
 * the one scrypt worker, so a flood of guesses at one account delays no one else's sign-in by more
 * than a second. An attempt cut short (a crash mid-check) stays counted, as a failure.
 */
const SIGN_IN_FAILURES = { perAccount: 5, perAddress: 20, windowMs: 15 * 60_000 } as const;

/**
 * How seldom a session's last use is written: a session seen within the last minute is not
 * written again. An idle timeout of hours loses at most a minute of precision; a page's bursts of
 * calls cost one write a minute, not one per call.
 */
const TOUCH_INTERVAL_MS = 60_000;

export interface SessionPolicy {
  /** A session unused this long has ended. */
  idleMs: number;
  /** A session this old has ended, used or not. */
  maxAgeMs: number;
}

/** A session's secret (for the cookie; never stored) and what it signs in. */
export interface NewSignIn {
  secret: string;
  account: Account;
  session: Session;
}

/** 256 random bits, base64url, after a prefix that says what the secret is (as token prefixes do). */
function newSecret(prefix: string): string {
  return `${prefix}${randomBytes(32).toString("base64url")}`;
}

/** The store keeps SHA-256 of session and link secrets: 256 random bits need no slow hash. */
function hashSecret(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

const SESSION_PREFIX = "mhs_";
const LINK_PREFIX = "mhl_";
const WELL_FORMED = /^mh[sl]_[A-Za-z0-9_-]{43}$/;

/**
 * Signing in to the browser playground (hosted profile): passwords (set through the CLI), one-time
 * sign-in links, and the server-side sessions they open. Everything lives in the access store,
 * so every replica honours every session; the clock is injectable for tests of expiry.
 */
export class SignInService {
  readonly #store: AccessStore;
  readonly #policy: SessionPolicy;
  readonly #now: () => number;

  constructor(store: AccessStore, policy: SessionPolicy, now: () => number = Date.now) {
    this.#store = store;
    this.#policy = policy;
    this.#now = now;
  }

  /** How long a session lasts at most (the cookie's Max-Age). */
  get maxAgeMs(): number {
    return this.#policy.maxAgeMs;
  }

  /** Sets an account's password (scrypt, own salt) and ends its sessions, on every replica. */
  async setPassword(nameOrId: string, password: string): Promise<Account> {
    if ([...password].length < MIN_PASSWORD_LENGTH || password.length > MAX_PASSWORD_LENGTH) {
      throw new AccessError("password_invalid", `A password is ${MIN_PASSWORD_LENGTH} to ${MAX_PASSWORD_LENGTH} characters long.`);
    }
    // The account first: hashing takes a while, and a typo in its name should fail at once.
    const account = (await this.#store.findAccount(nameOrId)) ?? accountNotFound(nameOrId);
    return this.#store.setPasswordHash(account.id, await hashPassword(password));
  }

  /** A one-time sign-in link's secret for an account, valid for SIGN_IN_LINK_TTL_MS. */
  async createSignInLink(nameOrId: string): Promise<{ secret: string; expiresAt: number; account: Account }> {
    const account = (await this.#store.findAccount(nameOrId)) ?? accountNotFound(nameOrId);
    if (account.disabled) throw new AccessError("account_disabled", `The account "${account.name}" is disabled: enable it first.`);
    const secret = newSecret(LINK_PREFIX);
    const now = this.#now();
    const expiresAt = now + SIGN_IN_LINK_TTL_MS;
    await this.#store.createSignInLink({ accountId: account.id, hash: hashSecret(secret), expiresAt }, now);
    return { secret, expiresAt, account };
  }

  /**
   * Signs in with a name and password, from a client address. A wrong name, a wrong password, an
   * account without a password or a disabled one all get the same `sign_in_failed`, after the
   * same scrypt work; too many recent failures for the name or the address get 429 first.
   */
  async signIn(name: string, password: string, address: string): Promise<NewSignIn> {
    const now = this.#now();
    const attempt = await this.#reserveAttempt(name, address, now);
    const found = password.length <= MAX_PASSWORD_LENGTH ? await this.#store.findPasswordHash(name) : undefined;
    const matches = found?.passwordHash
      ? await verifyPassword(password, found.passwordHash)
      : await burnPasswordCheck(password.slice(0, MAX_PASSWORD_LENGTH));
    // A failure stays counted: the attempt was recorded before the check.
    if (!found || !matches || found.account.disabled) throw new ServerError("sign_in_failed");
    await this.#store.releaseSignInAttempt(attempt);
    return this.#open(found.account, now);
  }

  /** Signs in with a one-time link's secret: unknown, used, expired or for a disabled account is `sign_in_failed`. */
  async signInWithLink(secret: string): Promise<NewSignIn> {
    const now = this.#now();
    const failed = () =>
      new ServerError("sign_in_failed", {
        message:
          "This sign-in link is not valid: it was used already, has expired (after 15 minutes), or was never issued. Ask for a new one.",
      });
    if (!WELL_FORMED.test(secret) || !secret.startsWith(LINK_PREFIX)) throw failed();
    const accountId = await this.#store.consumeSignInLink(hashSecret(secret), now);
    const account = accountId === undefined ? undefined : await this.#store.findAccount(accountId);
    if (!account || account.disabled) throw failed();
    return this.#open(account, now);
  }

  /** The live session behind a cookie's secret and its account, or undefined (unknown, ended, account disabled). */
  async authenticate(secret: string | undefined): Promise<{ session: Session; account: Account } | undefined> {
    if (secret === undefined || !WELL_FORMED.test(secret) || !secret.startsWith(SESSION_PREFIX)) return undefined;
    const found = await this.#store.findSessionByHash(hashSecret(secret));
    if (!found) return undefined;
    const now = this.#now();
    const { session, account } = found;
    if (account.disabled || now - session.createdAt >= this.#policy.maxAgeMs || now - session.lastSeenAt >= this.#policy.idleMs)
      return undefined;
    if (now - session.lastSeenAt >= TOUCH_INTERVAL_MS) await this.#store.touchSession(session.id, now);
    return found;
  }

  /** Ends the session behind a cookie's secret, wherever it was opened. */
  async signOut(secret: string): Promise<void> {
    if (WELL_FORMED.test(secret)) await this.#store.deleteSession(hashSecret(secret));
  }

  async #open(account: Account, now: number): Promise<NewSignIn> {
    const secret = newSecret(SESSION_PREFIX);
    const session = await this.#store.createSession({
      accountId: account.id,
      hash: hashSecret(secret),
      at: now,
      endedBefore: { createdBefore: now - this.#policy.maxAgeMs, idleBefore: now - this.#policy.idleMs },
    });
    return { secret, account, session };
  }

  /** Counts an attempt against the name's and the address's limits (see SIGN_IN_FAILURES), or refuses it with 429; returns its id. */
  async #reserveAttempt(name: string, address: string, now: number): Promise<string> {
    const id = randomBytes(16).toString("base64url");
    const reservation = await this.#store.reserveSignInAttempt({
      id,
      limits: [
        { key: `account:${name.toLowerCase()}`, limit: SIGN_IN_FAILURES.perAccount },
        { key: `address:${address}`, limit: SIGN_IN_FAILURES.perAddress },
      ],
      at: now,
      // An attempt counts for windowMs: one at `now - windowMs` has just left the window.
      since: now - SIGN_IN_FAILURES.windowMs + 1,
    });
    if (reservation.reserved) return id;
    // The oldest attempt leaves the window first; then one more is allowed.
    const retryAfter = Math.max(1, Math.ceil((reservation.oldest + SIGN_IN_FAILURES.windowMs - now) / 1000));
    throw new ServerError("rate_limit_exceeded", {
      retryAfter,
      limitKind: "requests",
      message: `Too many failed sign-ins for this account or from this address (attempts still being checked count too). Retry in ${retryAfter} s.`,
    });
  }
}
