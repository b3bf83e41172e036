import { randomBase36 } from "../../core/randomBase62.js";

/**
 * A tool call's id, as current Ollama servers write them: `call_` and 8 random digits or lower-case
 * letters (36^8, about 2.8e12, is plenty within one conversation). Clients send it back as the tool
 * message's `tool_call_id`, matched by the whole string.
 */
export function newToolCallId(): string {
  return `call_${randomBase36(8)}`;
}
