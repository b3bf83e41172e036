import type { ChatEvent, FinishReason, Usage } from "../../core/ChatEvent.js";
import { ServerError } from "../../core/ServerError.js";
import type { ChatCompletion, ChatCompletionUsage, WireToolCall } from "./schemas.js";

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

/**
 * The whole reply of a non-streamed request, gathered from the engine's events exactly as a client
 * accumulates the streamed chunks: text concatenated, each call's argument pieces appended in order.
 */
export async function toChatCompletion(identity: CompletionIdentity, events: AsyncIterable<ChatEvent>): Promise<ChatCompletion> {
  let text = "";
  const toolCalls: WireToolCall[] = [];
  let finish: { finishReason: FinishReason; usage: Usage } | undefined;
  for await (const event of events) {
    switch (event.type) {
      case "text":
        text += event.text;
        break;
      case "tool_call_start":
        toolCalls[event.index] = { id: event.id, type: "function", function: { name: event.name, arguments: "" } };
        break;
      case "tool_call_arguments": {
        const call = toolCalls[event.index];
        if (call) call.function.arguments += event.text;
        break;
      }
      case "done":
        finish = event;
        break;
      default:
        return event satisfies never;
    }
  }
  if (!finish) throw new ServerError("internal_error", { message: "The generation ended without a result." });
  return {
    id: identity.id,
    object: "chat.completion",
    created: identity.created,
    model: identity.model,
    choices: [
      {
        index: 0,
        // With tool calls, content is null unless the model also wrote text.
        message: {
          role: "assistant",
          content: toolCalls.length > 0 && text === "" ? null : text,
          refusal: null,
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: finish.finishReason,
        logprobs: null,
      },
    ],
    usage: toUsage(finish.usage),
  };
}
