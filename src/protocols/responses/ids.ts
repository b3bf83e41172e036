import { randomBase62 } from "../../core/randomBase62.js";

// The ids this API mints, in the shapes OpenAI's have.

/** An item id as OpenAI shapes them: a type prefix and random base62 (`msg_…`, `fc_…`; a response's `resp_…` is longer). */
export function newItemId(prefix: "msg" | "fc" | "fco" | "rs" | "resp"): string {
  return `${prefix}_${randomBase62(prefix === "resp" ? 40 : 32)}`;
}

/**
 * A function call's `call_id` (`call_` and 24 random base62 characters), apart from its item's
 * `fc_…` id: the client answers with a `function_call_output` of the same `call_id`, matched by the
 * whole string.
 */
export function newCallId(): string {
  return `call_${randomBase62(24)}`;
}
