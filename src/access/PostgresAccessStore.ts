import { createHash } from "node:crypto";
import pg from "pg";
import type { Pool, PoolClient } from "pg";
import { accountExists, accountNotFound, singleToken, tokenNotFound } from "./AccessError.js";
import type {
  AccessStore,
  AccessToken,
  Account,
  FoundSession,
  FoundToken,
  NewSession,
  NewToken,
  Session,
  SignInAttempt,
  SignInReservation,
  UsageQuery,
  UsageRow,
} from "./AccessStore.js";
import { inTransaction, openMigratedPool } from "../db/migratePostgres.js";
import {
  newAccessToken,
  newAccount,
  newSession,
  reservationOf,
  sessionByHashSql,
  signInTablesSql,
  toAccount,
  toSessionWithAccount,
  toToken,
  TOKEN_COLUMNS,
  toUsageRow,
} from "./storeRows.js";
import type { AccountColumns, SessionWithAccountColumns, TokenColumns, UsageColumns } from "./storeRows.js";

/**
 * Migration n takes the access schema from version n to n + 1. Never edit a released one: append
 * a new one. The statements are idempotent too (IF NOT EXISTS), so a schema made by hand or half
 * made before a version row existed is completed rather than refused.
 *
 * Timestamps are milliseconds since the epoch in bigint. Names, models and days sort with the "C"
 * collation: byte order, as in SQLite, whatever locale the database was created with, so both
 * stores list in the same order. `day` stays text (`YYYY-MM-DD`): a `date` column would come back
 * as a JavaScript Date in the client's time zone.
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS accounts (
     id text PRIMARY KEY,
     name text COLLATE "C" NOT NULL UNIQUE,
     tier text NOT NULL,
     disabled boolean NOT NULL DEFAULT false,
     created_at bigint NOT NULL
   );

   -- seq is the insertion order: "newest first" must not depend on the clocks of several replicas.
   CREATE TABLE IF NOT EXISTS access_tokens (
     seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
     id text NOT NULL UNIQUE,
     account_id text NOT NULL REFERENCES accounts (id),
     name text NOT NULL,
     prefix text NOT NULL,
     hash text NOT NULL UNIQUE,
     created_at bigint NOT NULL,
     expires_at bigint,
     last_used_at bigint,
     revoked_at bigint
   );
   CREATE INDEX IF NOT EXISTS access_tokens_account ON access_tokens (account_id, seq);
   CREATE INDEX IF NOT EXISTS access_tokens_prefix ON access_tokens (prefix);

   CREATE TABLE IF NOT EXISTS usage_ledger (
     account_id text NOT NULL REFERENCES accounts (id),
     token_id text NOT NULL REFERENCES access_tokens (id),
     model text COLLATE "C" NOT NULL,
     day text COLLATE "C" NOT NULL CHECK (day ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$'),
     requests bigint NOT NULL,
     prompt_tokens bigint NOT NULL,
     completion_tokens bigint NOT NULL,
     PRIMARY KEY (account_id, token_id, model, day)
   );
   CREATE INDEX IF NOT EXISTS usage_ledger_day ON usage_ledger (day);`,
  // 2: the playground's sign-in (issue 13); see signInTablesSql.
  `ALTER TABLE accounts ADD COLUMN IF NOT EXISTS password_hash text;
   ${signInTablesSql({ text: "text", integer: "bigint", table: "" })}
   ALTER TABLE usage_ledger DROP CONSTRAINT IF EXISTS usage_ledger_token_id_fkey;`,
  // 3: a sign-in attempt is recorded (so counted) before its password is checked, under an id that
  // removes it again if it succeeds (see reserveSignInAttempt). Older rows, without one, are failures.
  `ALTER TABLE sign_in_failures ADD COLUMN IF NOT EXISTS attempt text;
   CREATE INDEX IF NOT EXISTS sign_in_failures_attempt ON sign_in_failures (attempt);`,
];

/** This store's row in `schema_versions`. */
const SCHEMA_COMPONENT = "access";
const UNIQUE_VIOLATION = "23505";
/**
 * The first key of the two-key advisory locks that serialise sign-in attempts per key ("mhsi"):
 * a space of its own, apart from the one-key migration lock.
 */
const SIGN_IN_LOCKS = 0x6d687369;
const FOREIGN_KEY_VIOLATION = "23503";

/** An id wins over a name: a name can be anything, so it may look like another account's id. */
const ACCOUNT_ID_BY_KEY = "SELECT id FROM accounts WHERE id = $1 OR name = $1 ORDER BY id = $1 DESC LIMIT 1";

/**
 * The statements, each prepared once per pooled connection (a named query is parsed and planned
 * on its first use on a connection, then reused there).
 */
const SQL = {
  insertAccount: "INSERT INTO accounts (id, name, tier, disabled, created_at) VALUES ($1, $2, $3, $4, $5)",
  selectAccounts: "SELECT * FROM accounts ORDER BY name",
  selectAccount: `SELECT * FROM accounts WHERE id = (${ACCOUNT_ID_BY_KEY})`,
  updateDisabled: `UPDATE accounts SET disabled = $2 WHERE id = (${ACCOUNT_ID_BY_KEY}) RETURNING *`,
  updateTier: `UPDATE accounts SET tier = $2 WHERE id = (${ACCOUNT_ID_BY_KEY}) RETURNING *`,
  insertToken: `INSERT INTO access_tokens (id, account_id, name, prefix, hash, created_at, expires_at)
                VALUES ($1, $2, $3, $4, $5, $6, $7)`,
  selectTokens: `SELECT ${TOKEN_COLUMNS} FROM access_tokens ORDER BY seq DESC`,
  selectAccountTokens: `SELECT ${TOKEN_COLUMNS} FROM access_tokens WHERE account_id = $1 ORDER BY seq DESC`,
  // Two rows are enough to tell "exactly one" from "ambiguous".
  selectTokensByIdOrPrefix: `SELECT ${TOKEN_COLUMNS} FROM access_tokens WHERE id = $1 OR prefix = $1 LIMIT 2`,
  // Revoking twice keeps the first time: the audit trail shows when it really stopped working.
  updateRevoked: `UPDATE access_tokens SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1 RETURNING ${TOKEN_COLUMNS}`,
  // One statement, so the token and its account come from the same snapshot.
  selectTokenByHash: `SELECT t.id, t.account_id, t.name, t.prefix, t.created_at, t.expires_at, t.last_used_at, t.revoked_at, t.hash,
                             a.name AS account_name, a.tier AS account_tier, a.disabled AS account_disabled, a.created_at AS account_created_at
                      FROM access_tokens t JOIN accounts a ON a.id = t.account_id WHERE t.hash = $1`,
  // The whole batch in one statement (one commit). GREATEST ignores NULL; batches may arrive out
  // of order, and last use must never move backwards.
  updateLastUsed: `UPDATE access_tokens t SET last_used_at = GREATEST(t.last_used_at, v.at)
                   FROM unnest($1::text[], $2::bigint[]) AS v (id, at) WHERE t.id = v.id`,
  // Atomic under any concurrency: a conflicting insert waits for the row lock, then adds.
  upsertUsage: `INSERT INTO usage_ledger (account_id, token_id, model, day, requests, prompt_tokens, completion_tokens)
                VALUES ($1, $2, $3, $4, $5, $6, $7)
                ON CONFLICT (account_id, token_id, model, day) DO UPDATE SET
                  requests = usage_ledger.requests + EXCLUDED.requests,
                  prompt_tokens = usage_ledger.prompt_tokens + EXCLUDED.prompt_tokens,
                  completion_tokens = usage_ledger.completion_tokens + EXCLUDED.completion_tokens`,
  selectUsage: `SELECT u.*, a.name AS account_name FROM usage_ledger u JOIN accounts a ON a.id = u.account_id
                WHERE ($1::text IS NULL OR u.account_id = $1) AND ($2::text IS NULL OR u.day >= $2)
                ORDER BY u.day, a.name, u.model, u.token_id COLLATE "C"`,
  // One statement (so one transaction): the password changes and the account's sessions end together.
  updatePassword: `WITH updated AS (UPDATE accounts SET password_hash = $2 WHERE id = (${ACCOUNT_ID_BY_KEY}) RETURNING *),
                        ended AS (DELETE FROM sessions WHERE account_id IN (SELECT id FROM updated))
                   SELECT * FROM updated`,
  selectPassword: "SELECT * FROM accounts WHERE name = $1",
  deleteEndedSessions: "DELETE FROM sessions WHERE created_at < $1 OR last_seen_at < $2",
  insertSession: "INSERT INTO sessions (id, hash, account_id, created_at, last_seen_at) VALUES ($1, $2, $3, $4, $5)",
  selectSession: sessionByHashSql("$1"),
  updateSessionSeen: "UPDATE sessions SET last_seen_at = GREATEST(last_seen_at, $2) WHERE id = $1",
  deleteSession: "DELETE FROM sessions WHERE hash = $1",
  deleteExpiredLinks: "DELETE FROM sign_in_links WHERE expires_at < $1",
  insertLink: "INSERT INTO sign_in_links (hash, account_id, expires_at) VALUES ($1, $2, $3)",
  // One statement: of two requests presenting the same link at once, exactly one gets its account
  // (the second waits for the first's row lock, then re-checks used_at and matches nothing).
  useLink: "UPDATE sign_in_links SET used_at = $2 WHERE hash = $1 AND used_at IS NULL AND expires_at > $2 RETURNING account_id",
  forgetAttempts: "DELETE FROM sign_in_failures WHERE at < $1",
  lockAttemptKey: "SELECT pg_advisory_xact_lock($1::integer, $2::integer)",
  countAttempts:
    "SELECT key, count(*) AS count, min(at) AS oldest FROM sign_in_failures WHERE key = ANY($1::text[]) AND at >= $2 GROUP BY key",
  insertAttempts: "INSERT INTO sign_in_failures (key, at, attempt) SELECT unnest($1::text[]), $2, $3",
  deleteAttempt: "DELETE FROM sign_in_failures WHERE attempt = $1",
} as const;

type Statement = keyof typeof SQL;

interface TokenWithAccountColumns extends TokenColumns {
  hash: string;
  account_name: string;
  account_tier: string;
  account_disabled: boolean;
  account_created_at: string;
}

/**
 * The access store on PostgreSQL, for several replicas sharing one database. Every statement runs
 * on its own in autocommit, so a resolved promise means committed (and, with the server's default
 * synchronous_commit, flushed to its WAL).
 */
export class PostgresAccessStore implements AccessStore {
  readonly #pool: Pool;

  private constructor(pool: Pool) {
    this.#pool = pool;
  }

  /** Connects to `url` (postgres://…), bringing the schema up to date. */
  static async connect(url: string): Promise<PostgresAccessStore> {
    return new PostgresAccessStore(await openMigratedPool(url, SCHEMA_COMPONENT, MIGRATIONS));
  }

  async createAccount(name: string, tier: string): Promise<Account> {
    const account = newAccount(name, tier);
    try {
      await this.#query("insertAccount", [account.id, name, tier, account.disabled, account.createdAt]);
      return account;
    } catch (error) {
      if (isViolation(error, UNIQUE_VIOLATION, "accounts_name_key")) accountExists(name);
      throw error;
    }
  }

  async listAccounts(): Promise<Account[]> {
    return (await this.#query<AccountColumns>("selectAccounts", [])).map(toAccount);
  }

  async findAccount(nameOrId: string): Promise<Account | undefined> {
    const [row] = await this.#query<AccountColumns>("selectAccount", [nameOrId]);
    return row && toAccount(row);
  }

  async setAccountDisabled(nameOrId: string, disabled: boolean): Promise<Account> {
    const [row] = await this.#query<AccountColumns>("updateDisabled", [nameOrId, disabled]);
    return toAccount(row ?? accountNotFound(nameOrId));
  }

  async setAccountTier(nameOrId: string, tier: string): Promise<Account> {
    const [row] = await this.#query<AccountColumns>("updateTier", [nameOrId, tier]);
    return toAccount(row ?? accountNotFound(nameOrId));
  }

  async createToken(token: NewToken): Promise<AccessToken> {
    const created = newAccessToken(token);
    try {
      await this.#query("insertToken", [
        created.id,
        created.accountId,
        created.name,
        created.prefix,
        token.hash,
        created.createdAt,
        created.expiresAt,
      ]);
      return created;
    } catch (error) {
      if (isViolation(error, FOREIGN_KEY_VIOLATION, "access_tokens_account_id_fkey")) accountNotFound(token.accountId);
      throw error;
    }
  }

  async listTokens(accountId?: string): Promise<AccessToken[]> {
    const rows =
      accountId === undefined
        ? await this.#query<TokenColumns>("selectTokens", [])
        : await this.#query<TokenColumns>("selectAccountTokens", [accountId]);
    return rows.map(toToken);
  }

  async revokeToken(idOrPrefix: string): Promise<AccessToken> {
    const match = singleToken(await this.#query<TokenColumns>("selectTokensByIdOrPrefix", [idOrPrefix]), idOrPrefix);
    const [row] = await this.#query<TokenColumns>("updateRevoked", [match.id, Date.now()]);
    return toToken(row ?? tokenNotFound(idOrPrefix));
  }

  async findTokenByHash(hash: string): Promise<FoundToken | undefined> {
    const [row] = await this.#query<TokenWithAccountColumns>("selectTokenByHash", [hash]);
    if (!row) return undefined;
    const account: AccountColumns = {
      id: row.account_id,
      name: row.account_name,
      tier: row.account_tier,
      disabled: row.account_disabled,
      created_at: row.account_created_at,
    };
    return { token: toToken(row), account: toAccount(account), hash: row.hash };
  }

  async touchTokens(lastUsed: ReadonlyMap<string, number>): Promise<void> {
    if (lastUsed.size === 0) return;
    await this.#query("updateLastUsed", [[...lastUsed.keys()], [...lastUsed.values()]]);
  }

  async setPasswordHash(nameOrId: string, hash: string | null): Promise<Account> {
    const [row] = await this.#query<AccountColumns>("updatePassword", [nameOrId, hash]);
    return toAccount(row ?? accountNotFound(nameOrId));
  }

  async findPasswordHash(name: string): Promise<{ account: Account; passwordHash: string | null } | undefined> {
    const [row] = await this.#query<AccountColumns & { password_hash: string | null }>("selectPassword", [name]);
    return row && { account: toAccount(row), passwordHash: row.password_hash };
  }

  async createSession(session: NewSession): Promise<Session> {
    const created = newSession(session);
    // Two statements, no transaction: a prune that ran without the insert (or the reverse) is still right.
    await this.#query("deleteEndedSessions", [session.endedBefore.createdBefore, session.endedBefore.idleBefore]);
    await this.#query("insertSession", [created.id, session.hash, created.accountId, created.createdAt, created.lastSeenAt]);
    return created;
  }

  async findSessionByHash(hash: string): Promise<FoundSession | undefined> {
    const [row] = await this.#query<SessionWithAccountColumns>("selectSession", [hash]);
    return row && toSessionWithAccount(row);
  }

  async touchSession(id: string, at: number): Promise<void> {
    await this.#query("updateSessionSeen", [id, at]);
  }

  async deleteSession(hash: string): Promise<void> {
    await this.#query("deleteSession", [hash]);
  }

  async createSignInLink(link: { accountId: string; hash: string; expiresAt: number }, at: number): Promise<void> {
    await this.#query("deleteExpiredLinks", [at]);
    await this.#query("insertLink", [link.hash, link.accountId, link.expiresAt]);
  }

  async consumeSignInLink(hash: string, at: number): Promise<string | undefined> {
    const [row] = await this.#query<{ account_id: string }>("useLink", [hash, at]);
    return row?.account_id;
  }

  /**
   * Counts and inserts under a transaction-scoped advisory lock per key, taken in one order (so two
   * attempts sharing keys never wait on each other crosswise): of attempts racing on any replicas,
   * each counts the committed ones before it. Old attempts are pruned first, on their own, so the
   * transaction only inserts and never waits on another's rows.
   */
  async reserveSignInAttempt(attempt: SignInAttempt): Promise<SignInReservation> {
    await this.#query("forgetAttempts", [attempt.since]);
    const keys = attempt.limits.map(({ key }) => key);
    return inTransaction(this.#pool, async (client) => {
      for (const lock of lockIdsOf(keys)) await queryOn(client, "lockAttemptKey", [SIGN_IN_LOCKS, lock]);
      const counted = await queryOn<{ key: string; count: string; oldest: string }>(client, "countAttempts", [keys, attempt.since]);
      const reservation = reservationOf(
        attempt,
        new Map(counted.map(({ key, count, oldest }) => [key, { count: Number(count), oldest: Number(oldest) }])),
      );
      if (reservation.reserved) await queryOn(client, "insertAttempts", [keys, attempt.at, attempt.id]);
      return reservation;
    });
  }

  async releaseSignInAttempt(id: string): Promise<void> {
    await this.#query("deleteAttempt", [id]);
  }

  async recordUsage(rows: readonly Omit<UsageRow, "accountName">[]): Promise<void> {
    if (rows.length === 0) return;
    await inTransaction(this.#pool, async (client) => {
      for (const row of rows) {
        await queryOn(client, "upsertUsage", [
          row.accountId,
          row.tokenId,
          row.model,
          row.day,
          row.requests,
          row.promptTokens,
          row.completionTokens,
        ]);
      }
    });
  }

  async usage(query: UsageQuery): Promise<UsageRow[]> {
    return (await this.#query<UsageColumns>("selectUsage", [query.accountId ?? null, query.since ?? null])).map(toUsageRow);
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }

  #query<Row extends object>(statement: Statement, values: unknown[]): Promise<Row[]> {
    return queryOn<Row>(this.#pool, statement, values);
  }
}

/** Runs a named statement on the pool, or on one connection inside a transaction. */
async function queryOn<Row extends object>(on: Pool | PoolClient, statement: Statement, values: unknown[]): Promise<Row[]> {
  const result = await on.query<Row>({ name: `access_${statement}`, text: SQL[statement], values });
  return result.rows;
}

/** The advisory lock of each distinct key (32 bits of its SHA-256), in ascending order. */
function lockIdsOf(keys: readonly string[]): number[] {
  const ids = new Set(keys.map((key) => createHash("sha256").update(key).digest().readInt32BE(0)));
  return [...ids].sort((a, b) => a - b);
}

function isViolation(error: unknown, code: string, constraint: string): boolean {
  return error instanceof pg.DatabaseError && error.code === code && error.constraint === constraint;
}
