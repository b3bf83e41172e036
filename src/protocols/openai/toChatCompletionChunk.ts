import type { ChatEvent, Usage } from "../../core/ChatEvent.js";
import type { ChatCompletionChunk } from "./schemas.js";
import { toChatLogprobs, toUsage, type CompletionIdentity } from "./toChatCompletion.js";

export interface StreamIdentity extends CompletionIdentity {
  /** stream_options.include_usage: every chunk carries `usage: null`, then one last chunk the totals. */
  includeUsage: boolean;
}

function chunk(identity: StreamIdentity, choices: ChatCompletionChunk["choices"]): ChatCompletionChunk {
  const base: ChatCompletionChunk = {
    id: identity.id,
    object: "chat.completion.chunk",
    created: identity.created,
    model: identity.model,
    choices,
  };
  if (identity.includeUsage) base.usage = null;
  return base;
}

/** OpenAI sends a role-only first chunk per choice; SDK accumulators rely on it to start the message. */
export function toRoleChunk(identity: StreamIdentity, index = 0): ChatCompletionChunk {
  return chunk(identity, [{ index, delta: { role: "assistant", content: "" }, finish_reason: null, logprobs: null }]);
}

/**
 * The chunks of one stream's choices, each opened with the role as OpenAI opens it: a reply that
 * begins with text (or a thought, or nothing) gets the role-only chunk `{role, content: ""}` first;
 * one that begins with a call gets the role in the call's first chunk, with no `content` at all.
 * An empty `content` there would be an empty text part to clients that start one on any string (the
 * AI SDK does), so the role waits for the choice's first event.
 */
export class ChatCompletionChunks {
  readonly #identity: StreamIdentity;
  readonly #opened = new Set<number>();

  constructor(identity: StreamIdentity) {
    this.#identity = identity;
  }

  event(index: number, event: ChatEvent): ChatCompletionChunk[] {
    const chunks = toChatCompletionChunk(this.#identity, event, index);
    if (this.#opened.has(index)) return chunks;
    this.#opened.add(index);
    if (event.type !== "tool_call_start") return [toRoleChunk(this.#identity, index), ...chunks];
    for (const each of chunks) for (const choice of each.choices) choice.delta = { role: "assistant", ...choice.delta };
    return chunks;
  }
}

/** The chunks one engine event of choice `index` becomes: a content (or reasoning_content) delta, a call fragment, or the finish chunk. */
export function toChatCompletionChunk(identity: StreamIdentity, event: ChatEvent, index = 0): ChatCompletionChunk[] {
  switch (event.type) {
    case "thinking":
      return [chunk(identity, [{ index, delta: { reasoning_content: event.text }, finish_reason: null, logprobs: null }])];
    case "text":
      return [
        chunk(identity, [
          {
            index,
            delta: { content: event.text },
            finish_reason: null,
            logprobs: identity.logprobs ? toChatLogprobs(event.logprobs ?? []) : null,
          },
        ]),
      ];
    case "tool_call_start":
      // The first fragment of a call carries its id, type and name, with empty arguments.
      return [
        chunk(identity, [
          {
            index,
            delta: { tool_calls: [{ index: event.index, id: event.id, type: "function", function: { name: event.name, arguments: "" } }] },
            finish_reason: null,
            logprobs: null,
          },
        ]),
      ];
    case "tool_call_arguments":
      return [
        chunk(identity, [
          { index, delta: { tool_calls: [{ index: event.index, function: { arguments: event.text } }] }, finish_reason: null, logprobs: null },
        ]),
      ];
    case "done":
      return [chunk(identity, [{ index, delta: {}, finish_reason: event.finishReason, logprobs: null }])];
    default:
      return event satisfies never;
  }
}

/** With stream_options.include_usage, the last chunk before [DONE]: no choices, the totals of all of them. */
export function toUsageChunk(identity: StreamIdentity, usage: Usage): ChatCompletionChunk {
  return { ...chunk(identity, []), usage: toUsage(usage) };
}
