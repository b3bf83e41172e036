/** Why generation ended. */
export type FinishReason = "stop" | "length" | "tool_calls";

/** Where a generation's time went, in milliseconds (fractional, from a monotonic clock). */
export interface GenerationTimings {
  /** Loading the model for this request; 0 when it was already resident. */
  loadMs: number;
  /** Reading the prompt, up to and including the first generated token. */
  promptMs: number;
  /** Generating the tokens after the first. */
  generationMs: number;
}

export interface Usage {
  promptTokens: number;
  /** Prompt tokens served from the cache of an earlier request instead of being evaluated. */
  cachedTokens: number;
  completionTokens: number;
  /** Of the completion tokens, those of the thought section; present when the model's template has one. */
  reasoningTokens?: number;
}

/** One alternative at a position: a token's text, its UTF-8 bytes and its log-probability. */
export interface TokenAlternative {
  /** The token's text (a token holding part of a character shows U+FFFD; its `bytes` are exact). */
  token: string;
  /** The token's raw UTF-8 bytes: a character split over several tokens is rebuilt by joining them. */
  bytes: readonly number[];
  /** Natural log of its probability in the distribution the token was sampled from. */
  logprob: number;
}

/** A generated token's log-probability and the most likely tokens at its position, best first. */
export interface TokenLogprob extends TokenAlternative {
  top: TokenAlternative[];
}

/**
 * What a running generation reports, in order: thinking, text and tool-call events, then exactly
 * one `done`. `thinking` events carry the text of the thought section of a model whose chat
 * template has one (`<think>…</think>` style), without its markers; they all come before the
 * answer's first `text` event. A call starts with `tool_call_start` (its name is known by then); its JSON arguments follow in
 * `tool_call_arguments` pieces, in order. Calls are numbered from 0 by `index`, which is all that
 * names them here: each protocol mints the ids its clients see (`call_…`, `toolu_…`) in its own shape.
 */
export type ChatEvent =
  | { type: "thinking"; text: string }
  | {
      type: "text";
      text: string;
      /**
       * Only when the request asked for logprobs: the tokens whose bytes this text completes, in
       * order (a token that ends inside a character comes with the text that completes it).
       */
      logprobs?: TokenLogprob[];
    }
  | { type: "tool_call_start"; index: number; name: string }
  | { type: "tool_call_arguments"; index: number; text: string }
  | {
      type: "done";
      finishReason: FinishReason;
      usage: Usage;
      timings: GenerationTimings;
      /** The request's stop sequence that ended generation, when one did (finish reason "stop"). */
      stopSequence?: string;
      /** With speculative decoding: the tokens drafted for this generation, and those the model accepted. */
      speculation?: SpeculationCounts;
    };

export interface SpeculationCounts {
  drafted: number;
  accepted: number;
}

/**
 * A running generation. It holds a decoding slot until it has ended or `return()` was called, so
 * whoever stops reading before the end must call `return()` (a `for await` that exits early does).
 */
export interface ChatStream extends AsyncIterableIterator<ChatEvent> {
  /**
   * The prompt's size in tokens, known once chat() has resolved (the `done` event's
   * usage.promptTokens): for formats that report it before the first event (Anthropic's
   * message_start). Absent where an engine cannot tell it early.
   */
  readonly promptTokens?: number;
  return(value?: undefined): Promise<IteratorResult<ChatEvent, void>>;
}
