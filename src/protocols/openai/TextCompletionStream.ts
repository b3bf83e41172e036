import type { StreamTranslator } from "../StreamTranslator.js";
import { PromptUsages, type ChoiceEvent, type StreamIdentity } from "./ChatCompletionStream.js";
import type { LegacyLogprobs, TextCompletion, TextCompletionChoice } from "./schemas.js";
import { toLegacyLogprobs, toLegacyUsage } from "./toTextCompletion.js";

/** Streamed legacy completion chunks; keeps each choice's text offset for its logprobs. */
export class TextCompletionStream implements StreamTranslator<ChoiceEvent, TextCompletion> {
  readonly #identity: StreamIdentity;
  readonly #offsets = new Map<number, number>();
  readonly #echo: boolean;
  readonly #usages = new PromptUsages();

  constructor(identity: StreamIdentity, echo = false) {
    this.#identity = identity;
    this.#echo = echo;
  }

  start(): TextCompletion[] {
    return [];
  }

  /** The chunk one engine event of a choice becomes: text (with its logprobs), or the finish. */
  next(choiceEvent: ChoiceEvent): TextCompletion[] {
    const { choice: index, event } = choiceEvent;
    this.#usages.add(choiceEvent);
    switch (event.type) {
      case "text": {
        let logprobs: LegacyLogprobs | null = null;
        if (this.#identity.logprobs) {
          // A choice's first text, with echo, is the prompt: its first token has no logprob.
          const first = !this.#offsets.has(index);
          const legacy = toLegacyLogprobs(event.logprobs ?? [], this.#offsets.get(index) ?? 0, this.#echo && first);
          this.#offsets.set(index, legacy.offset);
          logprobs = legacy.logprobs;
        }
        return [this.#chunk([{ index, text: event.text, logprobs, finish_reason: null }])];
      }
      case "done":
        return [this.#chunk([{ index, text: "", logprobs: null, finish_reason: event.finishReason }])];
      // No chat template, no tools and no thought section: a completion has only text.
      case "thinking":
      case "tool_call_start":
      case "tool_call_arguments":
        return [];
      default:
        return event satisfies never;
    }
  }

  /** With stream_options.include_usage, the last chunk before [DONE]. */
  end(): TextCompletion[] {
    return this.#identity.includeUsage ? [{ ...this.#chunk([]), usage: toLegacyUsage(this.#usages.total) }] : [];
  }

  #chunk(choices: TextCompletionChoice[]): TextCompletion {
    const { id, created, model, includeUsage } = this.#identity;
    return { id, object: "text_completion", created, model, choices, ...(includeUsage ? { usage: null } : {}) };
  }
}
