import type { ChatEvent } from "../../core/ChatEvent.js";
import type { ChatCompletionChunk } from "./schemas.js";
import { toUsage, type CompletionIdentity } from "./toChatCompletion.js";

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

/** OpenAI sends a role-only first chunk; SDK accumulators rely on it to start the message. */
export function toRoleChunk(identity: StreamIdentity): ChatCompletionChunk {
  return chunk(identity, [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null, logprobs: null }]);
}

/** The chunks one engine event becomes: a content delta, or the finish chunk (and the usage chunk). */
export function toChatCompletionChunk(identity: StreamIdentity, event: ChatEvent): ChatCompletionChunk[] {
  switch (event.type) {
    case "text":
      return [chunk(identity, [{ index: 0, delta: { content: event.text }, finish_reason: null, logprobs: null }])];
    case "tool_call_start":
      // The first fragment of a call carries its id, type and name, with empty arguments.
      return [
        chunk(identity, [
          {
            index: 0,
            delta: { tool_calls: [{ index: event.index, id: event.id, type: "function", function: { name: event.name, arguments: "" } }] },
            finish_reason: null,
            logprobs: null,
          },
        ]),
      ];
    case "tool_call_arguments":
      return [
        chunk(identity, [
          { index: 0, delta: { tool_calls: [{ index: event.index, function: { arguments: event.text } }] }, finish_reason: null, logprobs: null },
        ]),
      ];
    case "done": {
      const finish = chunk(identity, [{ index: 0, delta: {}, finish_reason: event.finishReason, logprobs: null }]);
      if (!identity.includeUsage) return [finish];
      return [finish, { ...chunk(identity, []), usage: toUsage(event.usage) }];
    }
    default:
      return event satisfies never;
  }
}
