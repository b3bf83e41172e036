import { AccessError } from "./AccessStore.js";

/** The errors both access stores raise for the same caller mistakes, worded once. */
export function accountNotFound(nameOrId: string): never {
  throw new AccessError("account_not_found", `No account "${nameOrId}".`);
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
