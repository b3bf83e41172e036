import type { FinishReason, Usage } from "../../core/ChatEvent.js";
import type { ChatCompletion, ChatCompletionUsage } from "./schemas.js";

export interface CompletionIdentity {
  /** `chatcmpl-…`, shared by every chunk of one stream. */
  id: string;
  /** Seconds since the epoch, shared by every chunk of one stream. */
  created: number;
  /** The model name as the caller sent it. */
  model: string;
}

export function toUsage(usage: Usage): ChatCompletionUsage {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens },
  };
}

/** The whole reply of a non-streamed request. */
export function toChatCompletion(
  identity: CompletionIdentity,
  reply: { text: string; finishReason: FinishReason; usage: Usage },
): ChatCompletion {
  return {
    id: identity.id,
    object: "chat.completion",
    created: identity.created,
    model: identity.model,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: reply.text, refusal: null },
        finish_reason: reply.finishReason,
        logprobs: null,
      },
    ],
    usage: toUsage(reply.usage),
  };
}
