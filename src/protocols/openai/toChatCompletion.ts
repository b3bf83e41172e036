import type { ChatEvent, FinishReason, TokenAlternative, TokenLogprob, Usage } from "../../core/ChatEvent.js";
import { endedWithoutResult } from "../StreamTranslator.js";
import { newToolCallId } from "./ids.js";
import type { ChatCompletion, ChatCompletionUsage, WireLogprobs, WireToolCall } from "./schemas.js";

export interface CompletionIdentity {
  /** `chatcmpl-…`, shared by every chunk of one stream. */
  id: string;
  /** Seconds since the epoch, shared by every chunk of one stream. */
  created: number;
  /** The model name as the caller sent it. */
  model: string;
  /** The caller asked for logprobs: choices carry them instead of `logprobs: null`. */
  logprobs?: boolean;
}

export function toUsage(usage: Usage): ChatCompletionUsage {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens },
    ...(usage.reasoningTokens === undefined ? {} : { completion_tokens_details: { reasoning_tokens: usage.reasoningTokens } }),
  };
}

/** The usage of n choices of one prompt: the prompt counted once, the completions summed. */
function totalUsage(usages: readonly Usage[]): Usage {
  const [first] = usages;
  return {
    promptTokens: first?.promptTokens ?? 0,
    cachedTokens: first?.cachedTokens ?? 0,
    completionTokens: usages.reduce((sum, usage) => sum + usage.completionTokens, 0),
    // Present when the model has a thought section (every choice's usage has it then).
    ...(first?.reasoningTokens === undefined
      ? {}
      : { reasoningTokens: usages.reduce((sum, usage) => sum + (usage.reasoningTokens ?? 0), 0) }),
  };
}

/** The usage of several prompts' choices: each prompt once, every completion. */
export function promptsUsage(batches: ReadonlyArray<readonly Usage[]>): Usage {
  return batches.map(totalUsage).reduce((sum, each) => ({
    promptTokens: sum.promptTokens + each.promptTokens,
    cachedTokens: sum.cachedTokens + each.cachedTokens,
    completionTokens: sum.completionTokens + each.completionTokens,
    ...(each.reasoningTokens === undefined ? {} : { reasoningTokens: (sum.reasoningTokens ?? 0) + each.reasoningTokens }),
  }));
}

/** One choice, gathered from the engine's events exactly as a client accumulates the streamed chunks. */
export interface CollectedChoice {
  text: string;
  /** The thought section's text, apart from the answer; empty when there was none. */
  reasoning: string;
  toolCalls: WireToolCall[];
  /** Every logprob the text events carried, in order (empty when none were asked for). */
  logprobs: TokenLogprob[];
  finishReason: FinishReason;
  usage: Usage;
}

/** Reads one choice's events to the end: text (and thought) concatenated, each call's argument pieces appended in order. */
export async function collectChoice(events: AsyncIterable<ChatEvent>): Promise<CollectedChoice> {
  let text = "";
  let reasoning = "";
  const toolCalls: WireToolCall[] = [];
  const logprobs: TokenLogprob[] = [];
  let finish: { finishReason: FinishReason; usage: Usage } | undefined;
  for await (const event of events) {
    switch (event.type) {
      case "thinking":
        reasoning += event.text;
        break;
      case "text":
        text += event.text;
        if (event.logprobs) logprobs.push(...event.logprobs);
        break;
      case "tool_call_start":
        toolCalls[event.index] = { id: newToolCallId(), type: "function", function: { name: event.name, arguments: "" } };
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
  if (!finish) throw endedWithoutResult();
  return { text, reasoning, toolCalls, logprobs, finishReason: finish.finishReason, usage: finish.usage };
}

function toAlternative({ token, logprob, bytes }: TokenAlternative): { token: string; logprob: number; bytes: number[] } {
  return { token, logprob, bytes: [...bytes] };
}

/** Chat completions' logprobs: per token its text, logprob, bytes and the most likely alternatives. */
export function toChatLogprobs(entries: readonly TokenLogprob[]): WireLogprobs {
  return { content: entries.map((entry) => ({ ...toAlternative(entry), top_logprobs: entry.top.map(toAlternative) })), refusal: null };
}

/** The whole reply of a non-streamed request; its choices are read concurrently, as they decode in parallel. */
export async function toChatCompletion(
  identity: CompletionIdentity,
  streams: ReadonlyArray<AsyncIterable<ChatEvent>>,
): Promise<ChatCompletion> {
  const choices = await Promise.all(streams.map(collectChoice));
  return {
    id: identity.id,
    object: "chat.completion",
    created: identity.created,
    model: identity.model,
    choices: choices.map(({ text, reasoning, toolCalls, logprobs, finishReason }, index) => ({
      index,
      // With tool calls, content is null unless the model also wrote text.
      message: {
        role: "assistant",
        content: toolCalls.length > 0 && text === "" ? null : text,
        ...(reasoning === "" ? {} : { reasoning_content: reasoning }),
        refusal: null,
        ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
      },
      finish_reason: finishReason,
      logprobs: identity.logprobs ? toChatLogprobs(logprobs) : null,
    })),
    usage: toUsage(totalUsage(choices.map((choice) => choice.usage))),
  };
}
