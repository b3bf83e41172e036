/** Why generation ended. */
export type FinishReason = "stop" | "length";

export interface Usage {
  promptTokens: number;
  /** Prompt tokens served from the cache of an earlier request instead of being evaluated. */
  cachedTokens: number;
  completionTokens: number;
}

/** What a running generation reports, in order: any number of `text` events, then exactly one `done`. */
export type ChatEvent =
  | { type: "text"; text: string }
  | { type: "done"; finishReason: FinishReason; usage: Usage };

export type ChatStream = AsyncIterable<ChatEvent>;
