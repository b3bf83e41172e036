import { CodedError } from "../core/CodedError.js";

export const accessErrorCodes = [
  "account_exists",
  "account_not_found",
  "account_invalid",
  "tier_not_found",
  "token_not_found",
  "token_ambiguous",
  "expiry_invalid",
  "date_invalid",
  "tiers_file_invalid",
  "password_invalid",
  "account_disabled",
] as const;

export type AccessErrorCode = (typeof accessErrorCodes)[number];

/** A mistake in a request to manage accounts, tokens or usage, or in the tiers file: nothing was changed. */
export class AccessError extends CodedError<AccessErrorCode> {
  readonly code: AccessErrorCode;

  constructor(code: AccessErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "AccessError";
    this.code = code;
  }
}

// The errors both access stores and the service raise for the same mistakes, each worded once.

export function accountNotFound(nameOrId: string): never {
  throw new AccessError("account_not_found", `No account "${nameOrId}".`);
}

export function accountExists(name: string): never {
  throw new AccessError("account_exists", `An account named "${name}" already exists.`);
}

export function tokenNotFound(idOrPrefix: string): never {
  throw new AccessError("token_not_found", `No token "${idOrPrefix}".`);
}

/** The one token an id or display prefix names, or the AccessError saying why there is not one. */
export function singleToken<Row>(matches: readonly Row[], idOrPrefix: string): Row {
  const [first, second] = matches;
  if (first === undefined) tokenNotFound(idOrPrefix);
  if (second !== undefined) {
    throw new AccessError("token_ambiguous", `More than one token starts with "${idOrPrefix}": revoke it by id.`);
  }
  return first;
}
