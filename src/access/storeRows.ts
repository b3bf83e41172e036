import { randomBase62 } from "../core/randomBase62.js";
import type { AccessToken, Account, NewSession, NewToken, Session, SignInAttempt, SignInReservation, UsageRow } from "./AccessStore.js";

// What the SQLite and PostgreSQL stores share beyond their storage: how records are made, and how
// rows of their (identically named) columns become records.

/** An integer column: a number from SQLite; text from PostgreSQL, whose bigints may exceed 2^53 (ours, ms timestamps and counters, are far below). */
type Integer = number | string;

export interface AccountColumns {
  id: string;
  name: string;
  tier: string;
  /** 0 or 1 in SQLite, a boolean in PostgreSQL. */
  disabled: number | boolean;
  created_at: Integer;
}

export interface TokenColumns {
  id: string;
  account_id: string;
  name: string;
  prefix: string;
  created_at: Integer;
  expires_at: Integer | null;
  last_used_at: Integer | null;
  revoked_at: Integer | null;
}

export interface UsageColumns {
  account_id: string;
  account_name: string;
  token_id: string;
  model: string;
  day: string;
  requests: Integer;
  prompt_tokens: Integer;
  completion_tokens: Integer;
}

export interface SessionColumns {
  id: string;
  account_id: string;
  created_at: Integer;
  last_seen_at: Integer;
}

/** A session and its account, as both stores select them in one statement. */
export interface SessionWithAccountColumns extends SessionColumns {
  account_name: string;
  account_tier: string;
  account_disabled: number | boolean;
  account_created_at: Integer;
}

/** Selects a session by hash (the one parameter) with its account, as SessionWithAccountColumns: both stores' SQL. */
export function sessionByHashSql(parameter: string): string {
  return `SELECT s.id, s.account_id, s.created_at, s.last_seen_at,
                 a.name AS account_name, a.tier AS account_tier, a.disabled AS account_disabled, a.created_at AS account_created_at
          FROM sessions s JOIN accounts a ON a.id = s.account_id WHERE s.hash = ${parameter}`;
}

/**
 * The sessions, sign-in links and failed sign-ins tables, and the ledger without its token
 * foreign key (the playground's usage is recorded under PLAYGROUND_LEDGER_ID, which is no token):
 * migration 2 of both stores, from the parts that differ between their SQL dialects.
 */
export function signInTablesSql(types: { text: string; integer: string; table: string }): string {
  const { text, integer, table } = types;
  return `CREATE TABLE IF NOT EXISTS sessions (
     id ${text} PRIMARY KEY,
     hash ${text} NOT NULL UNIQUE,
     account_id ${text} NOT NULL REFERENCES accounts (id),
     created_at ${integer} NOT NULL,
     last_seen_at ${integer} NOT NULL
   )${table};
   CREATE INDEX IF NOT EXISTS sessions_account ON sessions (account_id);
   CREATE INDEX IF NOT EXISTS sessions_created ON sessions (created_at);
   CREATE INDEX IF NOT EXISTS sessions_last_seen ON sessions (last_seen_at);

   CREATE TABLE IF NOT EXISTS sign_in_links (
     hash ${text} PRIMARY KEY,
     account_id ${text} NOT NULL REFERENCES accounts (id),
     expires_at ${integer} NOT NULL,
     used_at ${integer}
   )${table};

   CREATE TABLE IF NOT EXISTS sign_in_failures (
     key ${text} NOT NULL,
     at ${integer} NOT NULL
   )${table};
   CREATE INDEX IF NOT EXISTS sign_in_failures_key ON sign_in_failures (key, at);
   CREATE INDEX IF NOT EXISTS sign_in_failures_at ON sign_in_failures (at);`;
}

/** How many attempts each key has had in the window (keys with none are absent), and when the oldest was. */
export type AttemptCounts = ReadonlyMap<string, { count: number; oldest: number }>;

/** What reserveSignInAttempt answers, given the keys' attempts in the window: the first key at its limit refuses. */
export function reservationOf(attempt: SignInAttempt, counts: AttemptCounts): SignInReservation {
  for (const { key, limit } of attempt.limits) {
    const counted = counts.get(key);
    if (counted && counted.count >= limit) return { reserved: false, key, oldest: counted.oldest };
  }
  return { reserved: true };
}

/** The columns of a token as records carry them: never the hash. */
export const TOKEN_COLUMNS = "id, account_id, name, prefix, created_at, expires_at, last_used_at, revoked_at";

/** A new account: enabled, created now. Ids are random, so replicas never coordinate to mint them. */
export function newAccount(name: string, tier: string): Account {
  return { id: `acct_${randomBase62(16)}`, name, tier, disabled: false, createdAt: Date.now() };
}

/** A new token record: created now, never used nor revoked. */
export function newAccessToken(token: NewToken): AccessToken {
  return {
    id: `tok_${randomBase62(16)}`,
    accountId: token.accountId,
    name: token.name,
    prefix: token.prefix,
    createdAt: Date.now(),
    expiresAt: token.expiresAt,
    lastUsedAt: null,
    revokedAt: null,
  };
}

/** A new session record, at the caller's time. */
export function newSession(session: NewSession): Session {
  return { id: `ses_${randomBase62(16)}`, accountId: session.accountId, createdAt: session.at, lastSeenAt: session.at };
}

export function toSessionWithAccount(row: SessionWithAccountColumns): { session: Session; account: Account } {
  const account = toAccount({
    id: row.account_id,
    name: row.account_name,
    tier: row.account_tier,
    disabled: row.account_disabled,
    created_at: row.account_created_at,
  });
  return {
    session: { id: row.id, accountId: row.account_id, createdAt: Number(row.created_at), lastSeenAt: Number(row.last_seen_at) },
    account,
  };
}

export function toAccount(row: AccountColumns): Account {
  return { id: row.id, name: row.name, tier: row.tier, disabled: Boolean(row.disabled), createdAt: Number(row.created_at) };
}

export function toToken(row: TokenColumns): AccessToken {
  return {
    id: row.id,
    accountId: row.account_id,
    name: row.name,
    prefix: row.prefix,
    createdAt: Number(row.created_at),
    expiresAt: orNull(row.expires_at),
    lastUsedAt: orNull(row.last_used_at),
    revokedAt: orNull(row.revoked_at),
  };
}

export function toUsageRow(row: UsageColumns): UsageRow {
  return {
    accountId: row.account_id,
    accountName: row.account_name,
    tokenId: row.token_id,
    model: row.model,
    day: row.day,
    requests: Number(row.requests),
    promptTokens: Number(row.prompt_tokens),
    completionTokens: Number(row.completion_tokens),
  };
}

function orNull(value: Integer | null): number | null {
  return value === null ? null : Number(value);
}
