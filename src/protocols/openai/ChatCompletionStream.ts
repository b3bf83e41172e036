import type { ChatEvent, Usage } from "../../core/ChatEvent.js";
import type { StreamTranslator } from "../StreamTranslator.js";
import { newToolCallId } from "./ids.js";
import type { ChatCompletionChunk } from "./schemas.js";
import { promptsUsage, toChatLogprobs, toUsage, type CompletionIdentity } from "./toChatCompletion.js";

export interface StreamIdentity extends CompletionIdentity {
  /** stream_options.include_usage: every chunk carries `usage: null`, then one last chunk the totals. */
  includeUsage: boolean;
}

/**
 * One event of a request's choices: chat completions stream n choices of one prompt, legacy
 * completions the choices of several prompts in turn. `choice` numbers them on across prompts;
 * `prompt` says whose prompt the usage is (each prompt is counted once, its completions summed).
 */
export interface ChoiceEvent {
  prompt: number;
  choice: number;
  event: ChatEvent;
}

/** The usage of every choice that ended, by prompt, for the include_usage chunk. */
export class PromptUsages {
  readonly #usages: Usage[][] = [];

  add({ prompt, event }: ChoiceEvent): void {
    if (event.type === "done") (this.#usages[prompt] ??= []).push(event.usage);
  }

  get total(): Usage {
    return promptsUsage(this.#usages.length === 0 ? [[]] : Array.from(this.#usages, (usages) => usages ?? []));
  }
}

/**
 * The chunks of one stream's choices, each opened with the role as OpenAI opens it: a reply that
 * begins with text (or a thought, or nothing) gets the role-only chunk `{role, content: ""}` first;
 * one that begins with a call gets the role in the call's first chunk, with no `content` at all.
 * An empty `content` there would be an empty text part to clients that start one on any string (the
 * AI SDK does), so the role waits for the choice's first event. SDK accumulators rely on the role
 * to start the message.
 */
export class ChatCompletionStream implements StreamTranslator<ChoiceEvent, ChatCompletionChunk> {
  readonly #identity: StreamIdentity;
  readonly #opened = new Set<number>();
  readonly #usages = new PromptUsages();

  constructor(identity: StreamIdentity) {
    this.#identity = identity;
  }

  start(): ChatCompletionChunk[] {
    return [];
  }

  next(choiceEvent: ChoiceEvent): ChatCompletionChunk[] {
    const { choice: index, event } = choiceEvent;
    this.#usages.add(choiceEvent);
    const chunks = this.#chunks(event, index);
    if (this.#opened.has(index)) return chunks;
    this.#opened.add(index);
    if (event.type !== "tool_call_start")
      return [this.#chunk([{ index, delta: { role: "assistant", content: "" }, finish_reason: null, logprobs: null }]), ...chunks];
    for (const each of chunks) for (const choice of each.choices) choice.delta = { role: "assistant", ...choice.delta };
    return chunks;
  }

  /** With stream_options.include_usage, the last chunk before [DONE]: no choices, the totals of all of them. */
  end(): ChatCompletionChunk[] {
    return this.#identity.includeUsage ? [{ ...this.#chunk([]), usage: toUsage(this.#usages.total) }] : [];
  }

  #chunk(choices: ChatCompletionChunk["choices"]): ChatCompletionChunk {
    const { id, created, model, includeUsage } = this.#identity;
    const base: ChatCompletionChunk = { id, object: "chat.completion.chunk", created, model, choices };
    if (includeUsage) base.usage = null;
    return base;
  }

  /** The chunks one engine event of choice `index` becomes: a content (or reasoning_content) delta, a call fragment, or the finish chunk. */
  #chunks(event: ChatEvent, index: number): ChatCompletionChunk[] {
    switch (event.type) {
      case "thinking":
        return [this.#chunk([{ index, delta: { reasoning_content: event.text }, finish_reason: null, logprobs: null }])];
      case "text":
        return [
          this.#chunk([
            {
              index,
              delta: { content: event.text },
              finish_reason: null,
              logprobs: this.#identity.logprobs ? toChatLogprobs(event.logprobs ?? []) : null,
            },
          ]),
        ];
      case "tool_call_start":
        // The first fragment of a call carries its id, type and name, with empty arguments.
        return [
          this.#chunk([
            {
              index,
              delta: {
                tool_calls: [{ index: event.index, id: newToolCallId(), type: "function", function: { name: event.name, arguments: "" } }],
              },
              finish_reason: null,
              logprobs: null,
            },
          ]),
        ];
      case "tool_call_arguments":
        return [
          this.#chunk([
            {
              index,
              delta: { tool_calls: [{ index: event.index, function: { arguments: event.text } }] },
              finish_reason: null,
              logprobs: null,
            },
          ]),
        ];
      case "done":
        return [this.#chunk([{ index, delta: {}, finish_reason: event.finishReason, logprobs: null }])];
      default:
        return event satisfies never;
    }
  }
}
