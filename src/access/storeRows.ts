import { randomBase62 } from "../core/randomBase62.js";
import type { AccessToken, Account, NewToken, UsageRow } from "./AccessStore.js";

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
