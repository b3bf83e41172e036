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

/** One ledger row: an account's use of one model through one token on one UTC day. */
export interface UsageRow {
  accountId: string;
  accountName: string;
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

/** A token found by its hash, with its account and the stored hash (compared by the caller in constant time). */
export interface FoundToken {
  token: AccessToken;
  account: Account;
  hash: string;
}

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

  /** Adds each row to the ledger row of its (account, token, model, day), creating it if needed; all in one transaction. */
  recordUsage(rows: readonly Omit<UsageRow, "accountName">[]): Promise<void>;
  usage(query: UsageQuery): Promise<UsageRow[]>;

  close(): Promise<void>;
}
