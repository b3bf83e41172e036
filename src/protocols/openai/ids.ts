import { randomBase62 } from "../../core/randomBase62.js";

// The ids this API mints, in the shapes OpenAI's have. Clients echo tool call ids back in the
// `tool_call_id` of their tool results, which are matched by the whole string, whatever its shape.

/** A chat completion's: `chatcmpl-` and 29 random base62 characters. */
export function newChatCompletionId(): string {
  return `chatcmpl-${randomBase62(29)}`;
}

/** A legacy text completion's: `cmpl-` and 29 random base62 characters. */
export function newTextCompletionId(): string {
  return `cmpl-${randomBase62(29)}`;
}

/** A tool call's: `call_` and 24 random base62 characters. */
export function newToolCallId(): string {
  return `call_${randomBase62(24)}`;
}
