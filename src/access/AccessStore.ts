/** A developer of the hosted profile: owns tokens, belongs to a tier. */
export interface Account {
  id: string;
  /** Unique, chosen at creation; what the CLI and logs show. */
  name: string;
  tier: string;
  disabled: boolean;
  /** Milliseconds since the epoch. */
  createdAt: number;
}

/** A personal access token as stored: never the secret, only its SHA-256 and a display prefix. */
export interface AccessToken {
  id: string;
  accountId: string;
  name: string;
  /** The first characters of the token (e.g. `mh_1a2B3c`), enough to recognise it in a list. */
  prefix: string;
  createdAt: number;
  /** null: never expires. */
  expiresAt: number | null;
  lastUsedAt: number | null;
  revokedAt: number | null;
}

/**
 * The ledger's token id for what an account used through the browser playground, signed in with
 * a session rather than a token: one row per account, model and day for all its sessions (a
 * session's own id would scatter the ledger over short-lived ids that mean nothing once it ends).
 */
export const PLAYGROUND_LEDGER_ID = "playground";

/** One ledger row: an account's use of one model through one token (or the playground) on one UTC day. */
export interface UsageRow {
  accountId: string;
  accountName: string;
  /** The token's id, or PLAYGROUND_LEDGER_ID for what the account's signed-in playground sessions used. */
  tokenId: string;
  model: string;
  /** `YYYY-MM-DD`, UTC. */
  day: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
}

export interface UsageQuery {
  accountId?: string;
  /** `YYYY-MM-DD`, inclusive. */
  since?: string;
}

export interface NewToken {
  accountId: string;
  name: string;
  prefix: string;
  /** Hex SHA-256 of the whole token. */
  hash: string;
  expiresAt: number | null;
}

/**
 * A signed-in browser session of the playground. Its secret lives only in the user's cookie; the
 * store keeps its SHA-256, as for tokens.
 */
export interface Session {
  id: string;
  accountId: string;
  createdAt: number;
  lastSeenAt: number;
}

export interface NewSession {
  accountId: string;
  /** Hex SHA-256 of the session secret. */
  hash: string;
  /** Milliseconds since the epoch, by the caller's clock (the store never reads one for sessions). */
  at: number;
  /** Sessions created before this, or last seen before `idleBefore`, are deleted meanwhile: they have ended. */
  endedBefore: { createdBefore: number; idleBefore: number };
}

/** A session found by its hash, with its account (the caller checks idleness, age and disabling). */
export interface FoundSession {
  session: Session;
  account: Account;
}

/** A token found by its hash, with its account and the stored hash (compared by the caller in constant time). */
export interface FoundToken {
  token: AccessToken;
  account: Account;
  hash: string;
}

/** A sign-in attempt to count before its password is checked (see AccessStore.reserveSignInAttempt). */
export interface SignInAttempt {
  /** Random: what releases it. */
  id: string;
  /** In the order they are checked; each key counts its own attempts. */
  limits: ReadonlyArray<{ key: string; limit: number }>;
  at: number;
  /** The window's start: attempts at or after it count. */
  since: number;
}

export type SignInReservation = { reserved: true } | { reserved: false; key: string; oldest: number };

/**
 * Accounts, tokens and the usage ledger. Implemented on SQLite (the embedded default, one file in
 * the data directory, WAL) and on PostgreSQL (several replicas). Every write is durable when the
 * promise resolves. Errors for the caller's mistakes are `AccessError`s;
 * what the two stores share beyond the storage lives in storeRows.ts.
 */
export interface AccessStore {
  createAccount(name: string, tier: string): Promise<Account>;
  listAccounts(): Promise<Account[]>;
  /** By name or id. */
  findAccount(nameOrId: string): Promise<Account | undefined>;
  setAccountDisabled(nameOrId: string, disabled: boolean): Promise<Account>;
  setAccountTier(nameOrId: string, tier: string): Promise<Account>;

  createToken(token: NewToken): Promise<AccessToken>;
  /** All tokens, or one account's, newest first. */
  listTokens(accountId?: string): Promise<AccessToken[]>;
  /** By id or by display prefix (which must then match exactly one token). */
  revokeToken(idOrPrefix: string): Promise<AccessToken>;
  /**
   * The token with this hash and its account, whatever their state (the caller checks expiry,
   * revocation, disabling). `hash` is the stored hash, which the caller compares in constant time.
   */
  findTokenByHash(hash: string): Promise<FoundToken | undefined>;
  /** Records when tokens were last used; may be batched by the caller. */
  touchTokens(lastUsed: ReadonlyMap<string, number>): Promise<void>;

  /**
   * Sets (or with null removes) an account's password hash (see passwords.ts) and ends the
   * account's sessions, in one transaction: a new password is how an operator shuts out whoever
   * learnt the old one, and the sessions they opened with it.
   */
  setPasswordHash(nameOrId: string, hash: string | null): Promise<Account>;
  /** The account with this exact name, and its password hash (null: it has none). */
  findPasswordHash(name: string): Promise<{ account: Account; passwordHash: string | null } | undefined>;

  createSession(session: NewSession): Promise<Session>;
  findSessionByHash(hash: string): Promise<FoundSession | undefined>;
  /** Records that a session was used at `at` (never moving it backwards). */
  touchSession(id: string, at: number): Promise<void>;
  /** Deletes the session with this hash, if there is one (signing out twice is no error). */
  deleteSession(hash: string): Promise<void>;

  /** Stores a one-time sign-in link's hash; links expired before `at` are deleted meanwhile. */
  createSignInLink(link: { accountId: string; hash: string; expiresAt: number }, at: number): Promise<void>;
  /** Marks the link used and returns its account id, atomically: only if it exists, is unused and has not expired at `at`. */
  consumeSignInLink(hash: string, at: number): Promise<string | undefined>;

  /**
   * Counts a sign-in attempt against the limits of its keys (account name, address) BEFORE its
   * password is checked, atomically on every replica: if each key has fewer than its `limit`
   * attempts since `since`, records the attempt under every key and returns "reserved"; otherwise
   * records nothing and returns the first key at its limit, with when its oldest attempt was.
   * An attempt stays counted (as a failure) until released; attempts before `since` are deleted
   * meanwhile.
   */
  reserveSignInAttempt(attempt: SignInAttempt): Promise<SignInReservation>;
  /** Stops counting an attempt that succeeded (a right password costs nothing against the limits). */
  releaseSignInAttempt(id: string): Promise<void>;

  /** Adds each row to the ledger row of its (account, token, model, day), creating it if needed; all in one transaction. */
  recordUsage(rows: readonly Omit<UsageRow, "accountName">[]): Promise<void>;
  usage(query: UsageQuery): Promise<UsageRow[]>;

  close(): Promise<void>;
}
