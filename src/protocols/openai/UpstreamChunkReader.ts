import type { ChatEvent, FinishReason, Usage } from "../../core/ChatEvent.js";

/** The parts of a streamed chat-completions chunk an upstream sends that are read here. */
interface UpstreamChunk {
  choices?: Array<{
    index?: number;
    delta?: {
      content?: string | null;
      /** The thought: llama-server's and vLLM's field (`reasoning` in vLLM's newer versions). */
      reasoning_content?: string | null;
      reasoning?: string | null;
      tool_calls?: Array<{ index?: number; function?: { name?: string | null; arguments?: string | null } }> | null;
    };
    finish_reason?: string | null;
  }>;
  usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
    completion_tokens_details?: { reasoning_tokens?: number } | null;
  } | null;
}

/**
 * Turns an upstream's streamed chat-completions chunks (choice 0) into the engine's events, the
 * inverse of ChatCompletionStream: the thought (`reasoning_content`), the text, each tool call's
 * start and argument pieces, then `done` with the upstream's own usage, which limits and the ledger
 * settle to. A stream that ends without a finish reason, or without usage, is the upstream's fault:
 * `finish` says so rather than guessing counts.
 */
export class UpstreamChunkReader {
  readonly #now: () => number;
  readonly #started: number;
  #firstAt: number | undefined;
  #finishReason: FinishReason | undefined;
  #usage: Usage | undefined;
  readonly #calls = new Set<number>();

  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
    this.#started = now();
  }

  /** The events one chunk carries (its JSON, parsed). */
  read(chunk: unknown): ChatEvent[] {
    const { choices, usage } = (chunk ?? {}) as UpstreamChunk;
    const events: ChatEvent[] = [];
    const choice = choices?.find((each) => (each.index ?? 0) === 0);
    const delta = choice?.delta;
    const thought = delta?.reasoning_content ?? delta?.reasoning;
    if (thought) events.push({ type: "thinking", text: thought });
    if (delta?.content) events.push({ type: "text", text: delta.content });
    for (const call of delta?.tool_calls ?? []) {
      const index = call.index ?? 0;
      const name = call.function?.name;
      if (!this.#calls.has(index) && name) {
        this.#calls.add(index);
        events.push({ type: "tool_call_start", index, name });
      }
      const piece = call.function?.arguments;
      if (piece && this.#calls.has(index)) events.push({ type: "tool_call_arguments", index, text: piece });
    }
    if (events.length > 0) this.#firstAt ??= this.#now();
    if (choice?.finish_reason) this.#finishReason = finishReasonOf(choice.finish_reason, this.#calls.size > 0);
    if (usage && typeof usage.prompt_tokens === "number" && typeof usage.completion_tokens === "number") {
      const reasoning = usage.completion_tokens_details?.reasoning_tokens;
      this.#usage = {
        promptTokens: usage.prompt_tokens,
        cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
        completionTokens: usage.completion_tokens,
        ...(typeof reasoning === "number" ? { reasoningTokens: reasoning } : {}),
      };
    }
    return events;
  }

  /** The `done` event once the stream has ended; throws, naming what is missing, if it ended short. */
  finish(): ChatEvent & { type: "done" } {
    if (this.#finishReason === undefined) throw new Error("the upstream's stream ended before its finish reason");
    if (this.#usage === undefined) throw new Error("the upstream's stream carried no usage (stream_options.include_usage)");
    const ended = this.#now();
    const first = this.#firstAt ?? ended;
    return {
      type: "done",
      finishReason: this.#finishReason,
      usage: this.#usage,
      timings: { loadMs: 0, promptMs: first - this.#started, generationMs: ended - first },
    };
  }
}

/** OpenAI's finish reasons as the engine's: a reply that made calls ended for them whatever the upstream says. */
function finishReasonOf(reason: string, madeCalls: boolean): FinishReason {
  if (reason === "length") return "length";
  if (reason === "tool_calls" || reason === "function_call" || madeCalls) return "tool_calls";
  return "stop";
}
