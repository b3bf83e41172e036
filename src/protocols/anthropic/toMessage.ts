import type { ChatEvent, FinishReason, Usage } from "../../core/ChatEvent.js";
import { ServerError } from "../../core/ServerError.js";
import type { Message, MessageStreamEvent, MessageUsage, ResponseContentBlock, StopReason } from "./schemas.js";

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

/**
 * Turns the engine's events into the Messages stream: `message_start`, then a content block per
 * run of thought, run of text, or tool call (`content_block_start`, its deltas,
 * `content_block_stop`), then `message_delta` (stop reason, usage) and `message_stop`.
 */
export class MessageStreamTranslator {
  readonly #identity: MessageIdentity;
  /** Index and kind of the block being written; tool calls by the engine's call index. */
  #open: { index: number; kind: "thinking" | "text" | "tool_use"; call?: number } | undefined;
  #next = 0;

  constructor(identity: MessageIdentity) {
    this.#identity = identity;
  }

  /** The first event: the message with no content yet; `promptTokens` as chat() knows them. */
  start(promptTokens: number): Extract<MessageStreamEvent, { type: "message_start" }> {
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
        usage: toUsage({ promptTokens, cachedTokens: 0, completionTokens: 0 }),
      },
    };
  }

  /** The stream events one engine event becomes. */
  push(event: ChatEvent): MessageStreamEvent[] {
    switch (event.type) {
      case "thinking":
        return this.#delta("thinking", { type: "thinking", thinking: "", signature: SIGNATURE }, { type: "thinking_delta", thinking: event.text });
      case "text":
        return this.#delta("text", { type: "text", text: "", citations: null }, { type: "text_delta", text: event.text });
      case "tool_call_start": {
        const events = this.#close();
        const index = this.#next++;
        this.#open = { index, kind: "tool_use", call: event.index };
        // The engine's `call_…` ids become Anthropic's `toolu_…` ones, with the same random part.
        const id = `toolu_${event.id.replace(/^call_/, "")}`;
        events.push({ type: "content_block_start", index, content_block: { type: "tool_use", id, name: event.name, input: {}, caller: { type: "direct" } } });
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
            delta: { stop_reason: toStopReason(event.finishReason, event.stopSequence), stop_sequence: event.stopSequence ?? null, stop_details: null, container: null },
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

  /** A delta for a block of `kind`, opening one first unless that kind is the one open. */
  #delta(kind: "thinking" | "text", block: ResponseContentBlock, delta: Extract<MessageStreamEvent, { type: "content_block_delta" }>["delta"]): MessageStreamEvent[] {
    const events: MessageStreamEvent[] = [];
    if (this.#open?.kind !== kind) {
      events.push(...this.#close());
      this.#open = { index: this.#next++, kind };
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
    if (open.kind === "thinking") events.push({ type: "content_block_delta", index: open.index, delta: { type: "signature_delta", signature: SIGNATURE } });
    events.push({ type: "content_block_stop", index: open.index });
    return events;
  }
}

/**
 * The whole reply of a non-streamed request: the stream's events applied in order, as the SDK
 * accumulates a streamed one, so both forms always agree.
 */
export async function toMessage(identity: MessageIdentity, events: AsyncIterable<ChatEvent>, promptTokens: number): Promise<Message> {
  const translator = new MessageStreamTranslator(identity);
  const { message } = translator.start(promptTokens);
  const json = new Map<number, string>();
  let finished = false;
  for await (const event of events) {
    for (const streamed of translator.push(event)) {
      switch (streamed.type) {
        case "content_block_start":
          message.content[streamed.index] = streamed.content_block;
          break;
        case "content_block_delta":
          applyDelta(message.content[streamed.index], streamed.delta, json, streamed.index);
          break;
        case "content_block_stop": {
          const block = message.content[streamed.index];
          if (block?.type === "tool_use") block.input = parseInput(json.get(streamed.index) ?? "");
          break;
        }
        case "message_delta":
          message.stop_reason = streamed.delta.stop_reason;
          message.stop_sequence = streamed.delta.stop_sequence;
          message.usage = { ...message.usage, ...streamed.usage };
          break;
        case "message_stop":
          finished = true;
          break;
        case "message_start":
          break;
        default:
          return streamed satisfies never;
      }
    }
  }
  if (!finished) throw new ServerError("internal_error", { message: "The generation ended without a result." });
  return message;
}

function applyDelta(
  block: ResponseContentBlock | undefined,
  delta: Extract<MessageStreamEvent, { type: "content_block_delta" }>["delta"],
  json: Map<number, string>,
  index: number,
): void {
  if (delta.type === "text_delta" && block?.type === "text") block.text += delta.text;
  else if (delta.type === "thinking_delta" && block?.type === "thinking") block.thinking += delta.thinking;
  else if (delta.type === "signature_delta" && block?.type === "thinking") block.signature = delta.signature;
  else if (delta.type === "input_json_delta") json.set(index, (json.get(index) ?? "") + delta.partial_json);
}

/** A call's arguments; a call cut off by max_tokens has incomplete JSON, and then no input. */
function parseInput(text: string): unknown {
  if (text === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    return {};
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
 * input_tokens is the whole prompt (what count_tokens returns). The engine's prefix cache is not
 * Anthropic's prompt caching (no cache_control, nothing written on request), so both cache
 * counters are 0; chat completions report the reused prefix as cached_tokens.
 */
function toUsage(usage: Usage): MessageUsage {
  return {
    input_tokens: usage.promptTokens,
    output_tokens: usage.completionTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation: null,
    server_tool_use: null,
    service_tier: null,
    inference_geo: null,
    output_tokens_details: usage.reasoningTokens === undefined ? null : { thinking_tokens: usage.reasoningTokens },
    speed: null,
  };
}
