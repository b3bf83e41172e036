import Database from "better-sqlite3";
import type { Database as Connection, Statement, Transaction } from "better-sqlite3";
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
import { openSqlite } from "../db/migrateSqlite.js";
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
 * a new one. STRICT tables make SQLite refuse a value of the wrong type (a float counter, a
 * string timestamp) instead of storing it.
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE accounts (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL UNIQUE,
     tier TEXT NOT NULL,
     disabled INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
     created_at INTEGER NOT NULL
   ) STRICT;

   -- seq is the insertion order: "newest first" must not depend on the clock's resolution or steps.
   CREATE TABLE access_tokens (
     seq INTEGER PRIMARY KEY,
     id TEXT NOT NULL UNIQUE,
     account_id TEXT NOT NULL REFERENCES accounts (id),
     name TEXT NOT NULL,
     prefix TEXT NOT NULL,
     hash TEXT NOT NULL UNIQUE,
     created_at INTEGER NOT NULL,
     expires_at INTEGER,
     last_used_at INTEGER,
     revoked_at INTEGER
   ) STRICT;
   CREATE INDEX access_tokens_account ON access_tokens (account_id, seq);
   CREATE INDEX access_tokens_prefix ON access_tokens (prefix);

   CREATE TABLE usage_ledger (
     account_id TEXT NOT NULL REFERENCES accounts (id),
     token_id TEXT NOT NULL REFERENCES access_tokens (id),
     model TEXT NOT NULL,
     day TEXT NOT NULL CHECK (day GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]'),
     requests INTEGER NOT NULL,
     prompt_tokens INTEGER NOT NULL,
     completion_tokens INTEGER NOT NULL,
     PRIMARY KEY (account_id, token_id, model, day)
   ) STRICT, WITHOUT ROWID;
   CREATE INDEX usage_ledger_day ON usage_ledger (day);`,
  // 2: the playground's sign-in (issue 13). SQLite cannot drop a foreign key, so the ledger is
  // copied into a table without the one on token_id (see signInTablesSql).
  `ALTER TABLE accounts ADD COLUMN password_hash TEXT;
   ${signInTablesSql({ text: "TEXT", integer: "INTEGER", table: " STRICT" })}
   CREATE TABLE usage_ledger_2 (
     account_id TEXT NOT NULL REFERENCES accounts (id),
     token_id TEXT NOT NULL,
     model TEXT NOT NULL,
     day TEXT NOT NULL CHECK (day GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]'),
     requests INTEGER NOT NULL,
     prompt_tokens INTEGER NOT NULL,
     completion_tokens INTEGER NOT NULL,
     PRIMARY KEY (account_id, token_id, model, day)
   ) STRICT, WITHOUT ROWID;
   INSERT INTO usage_ledger_2 SELECT account_id, token_id, model, day, requests, prompt_tokens, completion_tokens FROM usage_ledger;
   DROP TABLE usage_ledger;
   ALTER TABLE usage_ledger_2 RENAME TO usage_ledger;
   CREATE INDEX usage_ledger_day ON usage_ledger (day);`,
  // 3: a sign-in attempt is recorded (so counted) before its password is checked, under an id that
  // removes it again if it succeeds (see reserveSignInAttempt). Older rows, without one, are failures.
  `ALTER TABLE sign_in_failures ADD COLUMN attempt TEXT;
   CREATE INDEX sign_in_failures_attempt ON sign_in_failures (attempt);`,
];

/** This store's row in `schema_versions`. */
const SCHEMA_COMPONENT = "access";

/**
 * How long a write waits for another connection's write lock (the CLI while the server runs, or
 * the reverse) before failing with SQLITE_BUSY. better-sqlite3 waits synchronously, stalling the
 * event loop meanwhile; the waits are short because every write here is one small transaction.
 */
const BUSY_TIMEOUT_MS = 5_000;

/** An id wins over a name: a name can be anything, so it may look like another account's id. */
const ACCOUNT_BY_KEY = "SELECT * FROM accounts WHERE id = @key OR name = @key ORDER BY id = @key DESC LIMIT 1";

/**
 * The access store in one SQLite file: the embedded default. The server and the CLI may have it
 * open at once; WAL lets readers run beside the one writer, and `busy_timeout` makes a writer wait
 * for the other's lock instead of failing.
 *
 * Durability: `synchronous=FULL`. In WAL mode every commit appends to the WAL file; a process
 * killed with SIGKILL loses nothing either way, because the appended pages are in the OS page cache,
 * which survives the process. What FULL adds is an fsync of the WAL at each commit, so a commit
 * also survives the machine losing power or the kernel crashing; NORMAL only fsyncs at checkpoints
 * and may roll back the last commits then. The interface promises a write is durable when its
 * promise resolves, and a token handed to a user must not silently vanish, so FULL. The cost, one
 * fsync per commit (about 0.3 ms instead of 0.1 ms on an SSD), is nothing beside a generation.
 * `synchronous` is per connection: the rate limiter's NORMAL in the same file does not weaken it.
 */
export class SqliteAccessStore implements AccessStore {
  readonly #db: Connection;
  readonly #insertAccount: Statement<[Account]>;
  readonly #selectAccounts: Statement<[], AccountColumns>;
  readonly #selectAccount: Statement<[{ key: string }], AccountColumns>;
  readonly #updateDisabled: Statement<[{ key: string; disabled: number }], AccountColumns>;
  readonly #updateTier: Statement<[{ key: string; tier: string }], AccountColumns>;
  readonly #insertToken: Statement<[AccessToken & { hash: string }]>;
  readonly #selectTokens: Statement<[], TokenColumns>;
  readonly #selectAccountTokens: Statement<[string], TokenColumns>;
  readonly #selectTokensByIdOrPrefix: Statement<[{ key: string }], TokenColumns>;
  readonly #updateRevoked: Statement<[{ id: string; at: number }], TokenColumns>;
  readonly #selectTokenByHash: Statement<[string], TokenColumns & { hash: string }>;
  readonly #selectAccountById: Statement<[string], AccountColumns>;
  readonly #updateLastUsed: Statement<[{ id: string; at: number }]>;
  readonly #upsertUsage: Statement<[Omit<UsageRow, "accountName">]>;
  readonly #selectUsage: Statement<[{ accountId: string | null; since: string | null }], UsageColumns>;
  readonly #readTokenAndAccount: Transaction<(hash: string) => FoundToken | undefined>;
  readonly #updatePassword: Transaction<(key: string, hash: string | null) => AccountColumns | undefined>;
  readonly #selectPassword: Statement<[string], AccountColumns & { password_hash: string | null }>;
  readonly #insertSession: Transaction<(session: Session & { hash: string }, ended: NewSession["endedBefore"]) => void>;
  readonly #selectSession: Statement<[string], SessionWithAccountColumns>;
  readonly #updateSessionSeen: Statement<[{ id: string; at: number }]>;
  readonly #deleteSessionByHash: Statement<[string]>;
  readonly #insertLink: Transaction<(link: { accountId: string; hash: string; expiresAt: number }, at: number) => void>;
  readonly #useLink: Statement<[{ hash: string; at: number }], { account_id: string }>;
  readonly #reserveAttempt: Transaction<(attempt: SignInAttempt) => SignInReservation>;
  readonly #deleteAttempt: Statement<[string]>;
  readonly #touchAll: Transaction<(lastUsed: ReadonlyMap<string, number>) => void>;

  private constructor(db: Connection) {
    this.#db = db;
    this.#insertAccount = db.prepare(
      // A new account is enabled (see newAccount).
      "INSERT INTO accounts (id, name, tier, disabled, created_at) VALUES (@id, @name, @tier, 0, @createdAt)",
    );
    this.#selectAccounts = db.prepare("SELECT * FROM accounts ORDER BY name");
    this.#selectAccount = db.prepare(ACCOUNT_BY_KEY);
    this.#updateDisabled = db.prepare(
      `UPDATE accounts SET disabled = @disabled WHERE id = (SELECT id FROM (${ACCOUNT_BY_KEY})) RETURNING *`,
    );
    this.#updateTier = db.prepare(`UPDATE accounts SET tier = @tier WHERE id = (SELECT id FROM (${ACCOUNT_BY_KEY})) RETURNING *`);
    this.#insertToken = db.prepare(
      `INSERT INTO access_tokens (id, account_id, name, prefix, hash, created_at, expires_at)
       VALUES (@id, @accountId, @name, @prefix, @hash, @createdAt, @expiresAt)`,
    );
    this.#selectTokens = db.prepare(`SELECT ${TOKEN_COLUMNS} FROM access_tokens ORDER BY seq DESC`);
    this.#selectAccountTokens = db.prepare(`SELECT ${TOKEN_COLUMNS} FROM access_tokens WHERE account_id = ? ORDER BY seq DESC`);
    // Two rows are enough to tell "exactly one" from "ambiguous".
    this.#selectTokensByIdOrPrefix = db.prepare(`SELECT ${TOKEN_COLUMNS} FROM access_tokens WHERE id = @key OR prefix = @key LIMIT 2`);
    // Revoking twice keeps the first time: the audit trail shows when it really stopped working.
    this.#updateRevoked = db.prepare(
      `UPDATE access_tokens SET revoked_at = coalesce(revoked_at, @at) WHERE id = @id RETURNING ${TOKEN_COLUMNS}`,
    );
    this.#selectTokenByHash = db.prepare(`SELECT ${TOKEN_COLUMNS}, hash FROM access_tokens WHERE hash = ?`);
    this.#selectAccountById = db.prepare("SELECT * FROM accounts WHERE id = ?");
    // Batches may arrive out of order: never move last use backwards.
    this.#updateLastUsed = db.prepare("UPDATE access_tokens SET last_used_at = max(coalesce(last_used_at, 0), @at) WHERE id = @id");
    this.#upsertUsage = db.prepare(
      `INSERT INTO usage_ledger (account_id, token_id, model, day, requests, prompt_tokens, completion_tokens)
       VALUES (@accountId, @tokenId, @model, @day, @requests, @promptTokens, @completionTokens)
       ON CONFLICT (account_id, token_id, model, day) DO UPDATE SET
         requests = requests + excluded.requests,
         prompt_tokens = prompt_tokens + excluded.prompt_tokens,
         completion_tokens = completion_tokens + excluded.completion_tokens`,
    );
    this.#selectUsage = db.prepare(
      `SELECT u.*, a.name AS account_name FROM usage_ledger u JOIN accounts a ON a.id = u.account_id
       WHERE (@accountId IS NULL OR u.account_id = @accountId) AND (@since IS NULL OR u.day >= @since)
       ORDER BY u.day, a.name, u.model, u.token_id`,
    );
    // One read transaction: the token and its account from the same snapshot.
    this.#readTokenAndAccount = db.transaction((hash: string) => {
      const token = this.#selectTokenByHash.get(hash);
      const account = token && this.#selectAccountById.get(token.account_id);
      return token && account ? { token: toToken(token), account: toAccount(account), hash: token.hash } : undefined;
    });
    const updatePassword = db.prepare<[{ key: string; hash: string | null }], AccountColumns>(
      `UPDATE accounts SET password_hash = @hash WHERE id = (SELECT id FROM (${ACCOUNT_BY_KEY})) RETURNING *`,
    );
    const deleteAccountSessions = db.prepare("DELETE FROM sessions WHERE account_id = ?");
    this.#updatePassword = db.transaction((key, hash) => {
      const account = updatePassword.get({ key, hash });
      if (account) deleteAccountSessions.run(account.id);
      return account;
    });
    this.#selectPassword = db.prepare("SELECT * FROM accounts WHERE name = ?");
    const insertSession = db.prepare(
      "INSERT INTO sessions (id, hash, account_id, created_at, last_seen_at) VALUES (@id, @hash, @accountId, @createdAt, @lastSeenAt)",
    );
    const deleteEnded = db.prepare("DELETE FROM sessions WHERE created_at < @createdBefore OR last_seen_at < @idleBefore");
    this.#insertSession = db.transaction((session, ended) => {
      deleteEnded.run(ended);
      insertSession.run(session);
    });
    this.#selectSession = db.prepare(sessionByHashSql("?"));
    this.#updateSessionSeen = db.prepare("UPDATE sessions SET last_seen_at = max(last_seen_at, @at) WHERE id = @id");
    this.#deleteSessionByHash = db.prepare("DELETE FROM sessions WHERE hash = ?");
    const insertLink = db.prepare("INSERT INTO sign_in_links (hash, account_id, expires_at) VALUES (@hash, @accountId, @expiresAt)");
    const deleteExpiredLinks = db.prepare("DELETE FROM sign_in_links WHERE expires_at < ?");
    this.#insertLink = db.transaction((link, at) => {
      deleteExpiredLinks.run(at);
      insertLink.run(link);
    });
    // One statement: of two requests presenting the same link at once, exactly one gets its account.
    this.#useLink = db.prepare(
      "UPDATE sign_in_links SET used_at = @at WHERE hash = @hash AND used_at IS NULL AND expires_at > @at RETURNING account_id",
    );
    const forgetAttempts = db.prepare("DELETE FROM sign_in_failures WHERE at < ?");
    const countAttempts = db.prepare<[string, number], { key: string; count: number; oldest: number }>(
      "SELECT key, count(*) AS count, min(at) AS oldest FROM sign_in_failures WHERE key IN (SELECT value FROM json_each(?)) AND at >= ? GROUP BY key",
    );
    const insertAttempt = db.prepare("INSERT INTO sign_in_failures (key, at, attempt) VALUES (?, ?, ?)");
    // Run IMMEDIATE: the write lock is taken before counting, so of attempts racing in any process
    // on this file, each counts the ones before it.
    this.#reserveAttempt = db.transaction((attempt) => {
      forgetAttempts.run(attempt.since);
      const keys = attempt.limits.map(({ key }) => key);
      const counts = new Map(
        countAttempts.all(JSON.stringify(keys), attempt.since).map(({ key, count, oldest }) => [key, { count, oldest }]),
      );
      const reservation = reservationOf(attempt, counts);
      if (reservation.reserved) for (const key of keys) insertAttempt.run(key, attempt.at, attempt.id);
      return reservation;
    });
    this.#deleteAttempt = db.prepare("DELETE FROM sign_in_failures WHERE attempt = ?");
    // One transaction, so one fsync, for the whole batch.
    this.#touchAll = db.transaction((lastUsed: ReadonlyMap<string, number>) => {
      for (const [id, at] of lastUsed) this.#updateLastUsed.run({ id, at });
    });
  }

  /** Opens (creating if needed) the store in `file`, bringing its schema up to date. */
  static open(file: string): SqliteAccessStore {
    const options = {
      component: SCHEMA_COMPONENT,
      migrations: MIGRATIONS,
      busyTimeoutMs: BUSY_TIMEOUT_MS,
      synchronous: "FULL",
      foreignKeys: true,
    } as const;
    return openSqlite(file, options, (db) => new SqliteAccessStore(db));
  }

  async createAccount(name: string, tier: string): Promise<Account> {
    const account = newAccount(name, tier);
    try {
      this.#insertAccount.run(account);
    } catch (error) {
      if (isConstraintError(error, "SQLITE_CONSTRAINT_UNIQUE")) accountExists(name);
      throw error;
    }
    return account;
  }

  async listAccounts(): Promise<Account[]> {
    return this.#selectAccounts.all().map(toAccount);
  }

  async findAccount(nameOrId: string): Promise<Account | undefined> {
    const row = this.#selectAccount.get({ key: nameOrId });
    return row && toAccount(row);
  }

  async setAccountDisabled(nameOrId: string, disabled: boolean): Promise<Account> {
    return toAccount(this.#updateDisabled.get({ key: nameOrId, disabled: disabled ? 1 : 0 }) ?? accountNotFound(nameOrId));
  }

  async setAccountTier(nameOrId: string, tier: string): Promise<Account> {
    return toAccount(this.#updateTier.get({ key: nameOrId, tier }) ?? accountNotFound(nameOrId));
  }

  async createToken(token: NewToken): Promise<AccessToken> {
    const created = newAccessToken(token);
    try {
      this.#insertToken.run({ ...created, hash: token.hash });
    } catch (error) {
      if (isConstraintError(error, "SQLITE_CONSTRAINT_FOREIGNKEY")) accountNotFound(token.accountId);
      throw error;
    }
    return created;
  }

  async listTokens(accountId?: string): Promise<AccessToken[]> {
    const rows = accountId === undefined ? this.#selectTokens.all() : this.#selectAccountTokens.all(accountId);
    return rows.map(toToken);
  }

  async revokeToken(idOrPrefix: string): Promise<AccessToken> {
    const match = singleToken(this.#selectTokensByIdOrPrefix.all({ key: idOrPrefix }), idOrPrefix);
    return toToken(this.#updateRevoked.get({ id: match.id, at: Date.now() }) ?? tokenNotFound(idOrPrefix));
  }

  async findTokenByHash(hash: string): Promise<FoundToken | undefined> {
    return this.#readTokenAndAccount(hash);
  }

  async touchTokens(lastUsed: ReadonlyMap<string, number>): Promise<void> {
    // IMMEDIATE takes the write lock up front, so busy_timeout applies: a deferred transaction that
    // read first and then finds another connection has written since fails at once, without waiting.
    this.#touchAll.immediate(lastUsed);
  }

  async setPasswordHash(nameOrId: string, hash: string | null): Promise<Account> {
    return toAccount(this.#updatePassword.immediate(nameOrId, hash) ?? accountNotFound(nameOrId));
  }

  async findPasswordHash(name: string): Promise<{ account: Account; passwordHash: string | null } | undefined> {
    const row = this.#selectPassword.get(name);
    return row && { account: toAccount(row), passwordHash: row.password_hash };
  }

  async createSession(session: NewSession): Promise<Session> {
    const created = newSession(session);
    this.#insertSession.immediate({ ...created, hash: session.hash }, session.endedBefore);
    return created;
  }

  async findSessionByHash(hash: string): Promise<FoundSession | undefined> {
    const row = this.#selectSession.get(hash);
    return row && toSessionWithAccount(row);
  }

  async touchSession(id: string, at: number): Promise<void> {
    this.#updateSessionSeen.run({ id, at });
  }

  async deleteSession(hash: string): Promise<void> {
    this.#deleteSessionByHash.run(hash);
  }

  async createSignInLink(link: { accountId: string; hash: string; expiresAt: number }, at: number): Promise<void> {
    this.#insertLink.immediate(link, at);
  }

  async consumeSignInLink(hash: string, at: number): Promise<string | undefined> {
    return this.#useLink.get({ hash, at })?.account_id;
  }

  async reserveSignInAttempt(attempt: SignInAttempt): Promise<SignInReservation> {
    return this.#reserveAttempt.immediate(attempt);
  }

  async releaseSignInAttempt(id: string): Promise<void> {
    this.#deleteAttempt.run(id);
  }

  async recordUsage(rows: readonly Omit<UsageRow, "accountName">[]): Promise<void> {
    // One transaction, so one fsync, for the whole batch.
    this.#db
      .transaction(() => {
        for (const row of rows) this.#upsertUsage.run(row);
      })
      .immediate();
  }

  async usage(query: UsageQuery): Promise<UsageRow[]> {
    return this.#selectUsage.all({ accountId: query.accountId ?? null, since: query.since ?? null }).map(toUsageRow);
  }

  async close(): Promise<void> {
    this.#db.close();
  }
}

function isConstraintError(error: unknown, code: string): boolean {
  return error instanceof Database.SqliteError && error.code === code;
}
