import type { ChatEvent, FinishReason, Usage } from "../../core/ChatEvent.js";
import type { StreamTranslator } from "../StreamTranslator.js";
import { newToolUseId } from "./ids.js";
import type { MessageStreamEvent, MessageUsage, ResponseContentBlock, StopReason } from "./schemas.js";

export interface MessageIdentity {
  /** `msg_…`. */
  id: string;
  /** The model name as the caller sent it. */
  model: string;
}

/**
 * Thoughts here carry no signature: nothing signs them, and they are not shown to the model again
 * when a client sends them back. The field is still sent (empty), as the SDK's types declare it.
 */
const SIGNATURE = "";

/** The Messages stream's keepalive (sent once after `message_start` too). */
export const PING = { type: "ping" } as const;

/**
 * Turns the engine's events into the Messages stream: `message_start`, then a content block per
 * run of thought, run of text, or tool call (`content_block_start`, its deltas,
 * `content_block_stop`), then `message_delta` (stop reason, usage) and `message_stop`.
 */
export class MessageStream implements StreamTranslator<ChatEvent, MessageStreamEvent> {
  readonly #identity: MessageIdentity;
  readonly #promptTokens: number;
  /** Index and kind of the block being written; tool calls by the engine's call index. */
  #open: { index: number; kind: "thinking" | "text" | "tool_use"; call?: number } | undefined;
  #nextBlock = 0;

  /** `promptTokens` as chat() knows them, for the first event's usage. */
  constructor(identity: MessageIdentity, promptTokens: number) {
    this.#identity = identity;
    this.#promptTokens = promptTokens;
  }

  /**
   * The message with no content yet, then, as the API does, one ping, which also tells clients the
   * stream is live.
   */
  start(): MessageStreamEvent[] {
    return [this.messageStart(), PING];
  }

  /** The first event: the message with no content yet (a non-streamed reply starts from it). */
  messageStart(): Extract<MessageStreamEvent, { type: "message_start" }> {
    return {
      type: "message_start",
      message: {
        id: this.#identity.id,
        type: "message",
        role: "assistant",
        model: this.#identity.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        stop_details: null,
        container: null,
        diagnostics: null,
        usage: toUsage({ promptTokens: this.#promptTokens, cachedTokens: 0, completionTokens: 0 }),
      },
    };
  }

  /** The stream events one engine event becomes. */
  next(event: ChatEvent): MessageStreamEvent[] {
    switch (event.type) {
      case "thinking":
        return this.#delta(
          "thinking",
          { type: "thinking", thinking: "", signature: SIGNATURE },
          { type: "thinking_delta", thinking: event.text },
        );
      case "text":
        return this.#delta("text", { type: "text", text: "", citations: null }, { type: "text_delta", text: event.text });
      case "tool_call_start": {
        const events = this.#close();
        const index = this.#nextBlock++;
        this.#open = { index, kind: "tool_use", call: event.index };
        events.push({
          type: "content_block_start",
          index,
          content_block: { type: "tool_use", id: newToolUseId(), name: event.name, input: {}, caller: { type: "direct" } },
        });
        return events;
      }
      case "tool_call_arguments": {
        // Calls arrive one after another: arguments always continue the call that is open.
        const open = this.#open;
        if (open?.kind !== "tool_use" || open.call !== event.index) return [];
        return [{ type: "content_block_delta", index: open.index, delta: { type: "input_json_delta", partial_json: event.text } }];
      }
      case "done": {
        const events = this.#close();
        const usage = toUsage(event.usage);
        events.push(
          {
            type: "message_delta",
            delta: {
              stop_reason: toStopReason(event.finishReason, event.stopSequence),
              stop_sequence: event.stopSequence ?? null,
              stop_details: null,
              container: null,
            },
            usage: {
              input_tokens: usage.input_tokens,
              output_tokens: usage.output_tokens,
              cache_creation_input_tokens: usage.cache_creation_input_tokens,
              cache_read_input_tokens: usage.cache_read_input_tokens,
              server_tool_use: null,
              output_tokens_details: usage.output_tokens_details,
            },
          },
          { type: "message_stop" },
        );
        return events;
      }
      default:
        return event satisfies never;
    }
  }

  end(): MessageStreamEvent[] {
    return [];
  }

  /** A delta for a block of `kind`, opening one first unless that kind is the one open. */
  #delta(
    kind: "thinking" | "text",
    block: ResponseContentBlock,
    delta: Extract<MessageStreamEvent, { type: "content_block_delta" }>["delta"],
  ): MessageStreamEvent[] {
    const events: MessageStreamEvent[] = [];
    if (this.#open?.kind !== kind) {
      events.push(...this.#close());
      this.#open = { index: this.#nextBlock++, kind };
      events.push({ type: "content_block_start", index: this.#open.index, content_block: block });
    }
    events.push({ type: "content_block_delta", index: this.#open.index, delta });
    return events;
  }

  /** Ends the open block; a thought's block gets its signature first, as the API sends it. */
  #close(): MessageStreamEvent[] {
    const open = this.#open;
    if (!open) return [];
    this.#open = undefined;
    const events: MessageStreamEvent[] = [];
    if (open.kind === "thinking")
      events.push({ type: "content_block_delta", index: open.index, delta: { type: "signature_delta", signature: SIGNATURE } });
    events.push({ type: "content_block_stop", index: open.index });
    return events;
  }
}

function toStopReason(finishReason: FinishReason, stopSequence: string | undefined): StopReason {
  switch (finishReason) {
    case "stop":
      return stopSequence === undefined ? "end_turn" : "stop_sequence";
    case "length":
      return "max_tokens";
    case "tool_calls":
      return "tool_use";
    default:
      return finishReason satisfies never;
  }
}

/**
 * As Anthropic counts them, and llama-server's /v1/messages: prompt tokens served from the prompt
 * cache are `cache_read_input_tokens`, and `input_tokens` is the rest, so that the two add up to the
 * whole prompt (what count_tokens returns). Nothing is written to a cache on request (there is no
 * cache_control), so cache_creation_input_tokens is 0. message_start goes out before the prompt is
 * read, when what the cache holds is not known yet: it counts the whole prompt as input_tokens, and
 * message_delta gives the final split.
 */
export function toUsage(usage: Usage): MessageUsage {
  return {
    input_tokens: usage.promptTokens - usage.cachedTokens,
    output_tokens: usage.completionTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: usage.cachedTokens,
    cache_creation: null,
    server_tool_use: null,
    service_tier: null,
    inference_geo: null,
    output_tokens_details: usage.reasoningTokens === undefined ? null : { thinking_tokens: usage.reasoningTokens },
    speed: null,
  };
}
