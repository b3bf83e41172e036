import { randomBase62 } from "../../core/randomBase62.js";

// The ids this API mints, in the shapes Anthropic's have. Clients echo tool_use ids back in the
// `tool_use_id` of their tool_result blocks, which are matched by the whole string.

/** A message's: `msg_` and 24 random base62 characters. */
export function newMessageId(): string {
  return `msg_${randomBase62(24)}`;
}

/** A tool_use block's: `toolu_` and 24 random base62 characters. */
export function newToolUseId(): string {
  return `toolu_${randomBase62(24)}`;
}
