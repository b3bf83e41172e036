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
}

/**
 * What a running generation reports, in order: text and tool-call events, then exactly one `done`.
 * A call starts with `tool_call_start` (its name is known by then); its JSON arguments follow in
 * `tool_call_arguments` pieces, in order. Calls are numbered from 0 by `index`.
 */
export type ChatEvent =
  | { type: "text"; text: string }
  | { type: "tool_call_start"; index: number; id: string; name: string }
  | { type: "tool_call_arguments"; index: number; text: string }
  | { type: "done"; finishReason: FinishReason; usage: Usage; timings: GenerationTimings };

/**
 * A running generation. It holds a decoding slot until it has ended or `return()` was called, so
 * whoever stops reading before the end must call `return()` (a `for await` that exits early does).
 */
export interface ChatStream extends AsyncIterableIterator<ChatEvent> {
  return(value?: undefined): Promise<IteratorResult<ChatEvent, void>>;
}
