import type { ChatEvent, GenerationTimings, Usage } from "../../core/ChatEvent.js";
import type { StreamTranslator } from "../StreamTranslator.js";
import { newToolCallId } from "./ids.js";
import type { ChatResponse, DoneReason, GenerateResponse, Metrics, WireToolCall } from "./schemas.js";

export type ReplyKind = "chat" | "generate";
export type NativeChunk = ChatResponse | GenerateResponse;

export interface ReplyContext {
  kind: ReplyKind;
  /** The model name as the caller sent it. */
  model: string;
  /** Milliseconds since the request arrived: the final object's total_duration. */
  elapsedMs: () => number;
  /** Generate only: whether the final object carries `context` (not in raw mode, as the reference server). */
  tokenContext?: boolean;
  /** The wall clock, for created_at. */
  now?: () => Date;
}

/**
 * The final object's metrics; durations on this API are integer nanoseconds. Every one is sent,
 * zero too: the reference server leaves zero values out, but its durations are never zero (a
 * model already loaded still takes its scheduler some microseconds: `load_duration`), and clients
 * validate them as always there (ollama-ai-provider-v2 requires `load_duration` of /api/embed).
 */
function toMetrics(usage: Usage, timings: GenerationTimings, totalMs: number): Metrics {
  return {
    total_duration: nanoseconds(totalMs),
    load_duration: nanoseconds(timings.loadMs),
    prompt_eval_count: usage.promptTokens,
    // omitempty in Ollama's api.Metrics: sent only when the cache served some of the prompt.
    ...(usage.cachedTokens > 0 ? { prompt_eval_cached_count: usage.cachedTokens } : {}),
    prompt_eval_duration: nanoseconds(timings.promptMs),
    eval_count: usage.completionTokens,
    eval_duration: nanoseconds(timings.generationMs),
  };
}

export function nanoseconds(ms: number): number {
  return Math.round(ms * 1e6);
}

/**
 * Turns the engine's events into the native stream's objects: one per piece of text or thought, one per
 * complete tool call (a call's arguments arrive whole, as a JSON object, never in fragments),
 * and a last object with `done: true`, the reason and the metrics.
 */
export class NativeReplyStream implements StreamTranslator<ChatEvent, NativeChunk> {
  readonly #context: ReplyContext;
  /** Calls whose arguments are still arriving, by index. */
  #pending = new Map<number, { id: string; name: string; arguments: string }>();

  constructor(context: ReplyContext) {
    this.#context = context;
  }

  start(): NativeChunk[] {
    return [];
  }

  next(event: ChatEvent): NativeChunk[] {
    switch (event.type) {
      case "thinking":
        return [this.#thinkingChunk(event.text)];
      case "text":
        return [this.#chunk(event.text, false)];
      case "tool_call_start": {
        // Calls are generated one after another: a new one means the earlier ones are complete.
        const complete = this.#flushCalls();
        this.#pending.set(event.index, { id: newToolCallId(), name: event.name, arguments: "" });
        return complete;
      }
      case "tool_call_arguments": {
        const call = this.#pending.get(event.index);
        if (call) call.arguments += event.text;
        return [];
      }
      case "done":
        return [
          ...this.#flushCalls(),
          {
            ...this.#chunk("", true),
            done_reason: event.finishReason === "length" ? "length" : "stop",
            // Ollama's token context of the conversation, deprecated: this server keeps none (a request's `context` is ignored), so it is empty.
            ...(this.#context.kind === "generate" && this.#context.tokenContext !== false ? { context: [] } : {}),
            ...toMetrics(event.usage, event.timings, this.#context.elapsedMs()),
          },
        ];
      default:
        return event satisfies never;
    }
  }

  end(): NativeChunk[] {
    return [];
  }

  /** The one object of a request that only loaded (or unloaded) the model. */
  loaded(reason: Extract<DoneReason, "load" | "unload">): NativeChunk {
    return { ...this.#chunk("", true), done_reason: reason };
  }

  #flushCalls(): NativeChunk[] {
    if (this.#pending.size === 0) return [];
    const calls: WireToolCall[] = [...this.#pending.entries()].map(([index, call]) => ({
      id: call.id,
      function: { index, name: call.name, arguments: parseArguments(call.arguments) },
    }));
    this.#pending.clear();
    const chunk = this.#chunk("", false);
    if ("message" in chunk) chunk.message.tool_calls = calls;
    return [chunk];
  }

  /** A piece of the thought: empty content (or response) and the text in `thinking`. */
  #thinkingChunk(text: string): NativeChunk {
    const chunk = this.#chunk("", false);
    if ("message" in chunk) chunk.message.thinking = text;
    else chunk.thinking = text;
    return chunk;
  }

  #chunk(text: string, done: boolean): NativeChunk {
    const { kind, model } = this.#context;
    const created_at = (this.#context.now?.() ?? new Date()).toISOString();
    return kind === "chat"
      ? { model, created_at, message: { role: "assistant", content: text }, done }
      : { model, created_at, response: text, done };
  }
}

/** Arguments are JSON by the call grammar; should a model's text not parse, it is passed on as the string it is. */
function parseArguments(text: string): Record<string, unknown> | string {
  try {
    const value: unknown = JSON.parse(text === "" ? "{}" : text);
    if (value !== null && typeof value === "object" && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // not JSON: passed on below
  }
  return text;
}
