import type { AccessStore, AccessToken, Account, UsageQuery, UsageRow } from "./AccessStore.js";
import { AccessError, accountNotFound } from "./AccessError.js";
import { parseExpiry } from "./parseExpiry.js";
import { generateToken } from "./tokenFormat.js";
import type { TiersConfig } from "./tiers.js";

export const DEFAULT_TOKEN_EXPIRY = "90d";

/**
 * What an account holder or an operator can do: accounts, personal access tokens, usage. The CLI
 * uses it, and the browser playground will offer the same operations to a signed-in user.
 */
export class AccessService {
  readonly #store: AccessStore;
  readonly #tiers: TiersConfig;
  readonly #now: () => number;

  constructor(store: AccessStore, tiers: TiersConfig, now: () => number = Date.now) {
    this.#store = store;
    this.#tiers = tiers;
    this.#now = now;
  }

  async createAccount(name: string, tier = this.#tiers.default): Promise<Account> {
    if (!/^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/.test(name)) {
      throw new AccessError(
        "account_invalid",
        "Account names are 1 to 64 letters, digits, dots, underscores, @ or dashes, starting with a letter or digit.",
      );
    }
    this.#checkTier(tier);
    return this.#store.createAccount(name, tier);
  }

  listAccounts(): Promise<Account[]> {
    return this.#store.listAccounts();
  }

  /** A disabled account's tokens stop working at once; nothing is deleted. */
  disableAccount(nameOrId: string): Promise<Account> {
    return this.#store.setAccountDisabled(nameOrId, true);
  }

  enableAccount(nameOrId: string): Promise<Account> {
    return this.#store.setAccountDisabled(nameOrId, false);
  }

  async setTier(nameOrId: string, tier: string): Promise<Account> {
    this.#checkTier(tier);
    return this.#store.setAccountTier(nameOrId, tier);
  }

  /**
   * Creates a token and returns its secret: the only time it is ever shown. Its expiry is
   * `expires` as the CLI takes it (7d, 30d, a date, never), or `expiresAt` in milliseconds (null:
   * never), which must be in the future.
   */
  async createToken(
    accountNameOrId: string,
    options: { name?: string; expires?: string; expiresAt?: number | null } = {},
  ): Promise<{ secret: string; token: AccessToken }> {
    const account = await this.#account(accountNameOrId);
    const now = this.#now();
    const expiresAt = options.expiresAt !== undefined ? options.expiresAt : parseExpiry(options.expires ?? DEFAULT_TOKEN_EXPIRY, now);
    if (expiresAt === undefined) {
      throw new AccessError(
        "expiry_invalid",
        `Invalid expiry "${options.expires}": use 7d, 30d, 60d, 90d, a future date YYYY-MM-DD, or never.`,
      );
    }
    if (expiresAt !== null && expiresAt <= now) throw new AccessError("expiry_invalid", "A token's expiry must be in the future.");
    const { token: secret, prefix, hash } = generateToken();
    const token = await this.#store.createToken({ accountId: account.id, name: options.name ?? "default", prefix, hash, expiresAt });
    return { secret, token };
  }

  async listTokens(accountNameOrId?: string): Promise<AccessToken[]> {
    const account = accountNameOrId === undefined ? undefined : await this.#account(accountNameOrId);
    return this.#store.listTokens(account?.id);
  }

  revokeToken(idOrPrefix: string): Promise<AccessToken> {
    return this.#store.revokeToken(idOrPrefix);
  }

  async usage(query: { account?: string; since?: string } = {}): Promise<UsageRow[]> {
    const account = query.account === undefined ? undefined : await this.#account(query.account);
    const resolved: UsageQuery = {};
    if (account) resolved.accountId = account.id;
    if (query.since !== undefined) {
      if (!/^\d{4}-\d{2}-\d{2}$/.test(query.since) || Number.isNaN(Date.parse(query.since))) {
        throw new AccessError("date_invalid", `Invalid date "${query.since}": use YYYY-MM-DD.`);
      }
      resolved.since = query.since;
    }
    return this.#store.usage(resolved);
  }

  async #account(nameOrId: string): Promise<Account> {
    const account = await this.#store.findAccount(nameOrId);
    return account ?? accountNotFound(nameOrId);
  }

  #checkTier(tier: string): void {
    if (!this.#tiers.tiers[tier]) {
      throw new AccessError("tier_not_found", `No tier named "${tier}"; the tiers are: ${Object.keys(this.#tiers.tiers).join(", ")}.`);
    }
  }
}
