import type { TokenLogprob, Usage } from "../../core/ChatEvent.js";
import type { LegacyLogprobs, TextCompletion, TextCompletionChoice } from "./schemas.js";
import { promptsUsage, type CollectedChoice, type CompletionIdentity } from "./toChatCompletion.js";

export function toLegacyUsage(usage: Usage): NonNullable<TextCompletion["usage"]> {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
  };
}

/**
 * Legacy logprobs of some tokens, the first starting `offset` characters into the choice's text.
 * `top_logprobs` holds the most likely tokens and, as OpenAI's, always the sampled one too. Offsets
 * count code points, as Python's (vLLM's) `len`; a token that holds part of a character counts its
 * U+FFFD as one.
 */
export function toLegacyLogprobs(
  entries: readonly TokenLogprob[],
  offset: number,
  firstUnscored = false,
): { logprobs: LegacyLogprobs; offset: number } {
  const logprobs: LegacyLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  for (const [i, entry] of entries.entries()) {
    const unscored = firstUnscored && i === 0;
    logprobs.tokens.push(entry.token);
    logprobs.token_logprobs.push(unscored ? null : entry.logprob);
    logprobs.top_logprobs.push(unscored ? null : Object.fromEntries([...entry.top, entry].map((each) => [each.token, each.logprob])));
    logprobs.text_offset.push(offset);
    offset += [...entry.token].length;
  }
  return { logprobs, offset };
}

/**
 * The whole reply of a non-streamed legacy completion: the choices of each prompt in turn, numbered
 * on. `echo`: each choice's text opens with its prompt, whose first token has no logprob.
 */
export function toTextCompletion(
  identity: CompletionIdentity,
  batches: ReadonlyArray<readonly CollectedChoice[]>,
  echo = false,
): TextCompletion {
  return {
    id: identity.id,
    object: "text_completion",
    created: identity.created,
    model: identity.model,
    choices: batches.flat().map((choice, index): TextCompletionChoice => ({
      index,
      text: choice.text,
      logprobs: identity.logprobs ? toLegacyLogprobs(choice.logprobs, 0, echo).logprobs : null,
      finish_reason: choice.finishReason,
    })),
    usage: toLegacyUsage(promptsUsage(batches.map((choices) => choices.map((choice) => choice.usage)))),
  };
}
