import type { ChatEvent, TokenAlternative, TokenLogprob, Usage } from "../../core/ChatEvent.js";
import type { StreamTranslator } from "../StreamTranslator.js";
import { newCallId, newItemId } from "./ids.js";
import type {
  FunctionCallItem,
  OutputItem,
  OutputMessageItem,
  ReasoningItem,
  ResponseObject,
  ResponseSettings,
  ResponseStreamEvent,
  ResponseUsage,
  WireLogprob,
} from "./schemas.js";

/** The item being written: its events go to it until another item starts or the generation ends. */
type OpenItem =
  | { index: number; item: OutputMessageItem }
  | { index: number; item: ReasoningItem }
  | { index: number; item: FunctionCallItem; callIndex: number };

function toResponseUsage(usage: Usage): ResponseUsage {
  return {
    input_tokens: usage.promptTokens,
    input_tokens_details: { cached_tokens: usage.cachedTokens, cache_write_tokens: 0 },
    output_tokens: usage.completionTokens,
    // Counted by the engine for models whose template has a thought section; 0 for the others.
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
    total_tokens: usage.promptTokens + usage.completionTokens,
  };
}

function toWireAlternative(alternative: TokenAlternative) {
  return { token: alternative.token, bytes: [...alternative.bytes], logprob: alternative.logprob };
}

function toWireLogprob(logprob: TokenLogprob): WireLogprob {
  return { ...toWireAlternative(logprob), top_logprobs: logprob.top.map(toWireAlternative) };
}

/**
 * Turns the engine's events into a response object and the typed stream events that build it, in
 * the order OpenAI sends them: `response.created`, `response.in_progress`, then per output item
 * `output_item.added`, its parts and deltas, `output_item.done`, and finally `response.completed`
 * (or `response.incomplete` when the output cap was hit). A non-streamed reply is the same
 * response, with the events dropped: one implementation for both.
 *
 * Items: the thought (a `reasoning` item with one `reasoning_text` part), the answer's text (a
 * `message` with one `output_text` part), and one `function_call` item per call, in the order the
 * model wrote them. Text after a call opens a new message.
 */
export class ResponseStream implements StreamTranslator<ChatEvent, ResponseStreamEvent> {
  readonly #response: ResponseObject;
  #open: OpenItem | undefined;

  constructor(settings: ResponseSettings, id = newItemId("resp"), createdAt = Math.floor(Date.now() / 1000)) {
    this.#response = {
      id,
      object: "response",
      created_at: createdAt,
      status: "in_progress",
      completed_at: null,
      background: false,
      error: null,
      incomplete_details: null,
      max_tool_calls: null,
      output: [],
      output_text: "",
      usage: null,
      ...settings,
    };
  }

  /** The response as it stands (complete once `done` was pushed). */
  get response(): ResponseObject {
    return this.#response;
  }

  /** The first two events of a stream, both carrying the response in progress. */
  start(): ResponseStreamEvent[] {
    return [
      { type: "response.created", response: this.#snapshot() },
      { type: "response.in_progress", response: this.#snapshot() },
    ];
  }

  /** The stream events one engine event becomes. */
  next(event: ChatEvent): ResponseStreamEvent[] {
    switch (event.type) {
      case "thinking":
        return this.#appendText("reasoning", event.text);
      case "text":
        return this.#appendText("message", event.text, event.logprobs?.map(toWireLogprob) ?? []);
      case "tool_call_start": {
        const events = this.#close("completed");
        const item: FunctionCallItem = {
          type: "function_call",
          id: newItemId("fc"),
          call_id: newCallId(),
          name: event.name,
          arguments: "",
          status: "in_progress",
        };
        return [...events, this.#add({ index: this.#response.output.length, item, callIndex: event.index })];
      }
      case "tool_call_arguments": {
        const open = this.#open;
        if (open?.item.type !== "function_call" || !("callIndex" in open) || open.callIndex !== event.index) return [];
        open.item.arguments += event.text;
        return [{ type: "response.function_call_arguments.delta", item_id: open.item.id, output_index: open.index, delta: event.text }];
      }
      case "done": {
        const incomplete = event.finishReason === "length";
        const events = this.#close(incomplete ? "incomplete" : "completed");
        const response = this.#response;
        response.status = incomplete ? "incomplete" : "completed";
        response.incomplete_details = incomplete ? { reason: "max_output_tokens" } : null;
        response.completed_at = Math.floor(Date.now() / 1000);
        response.usage = toResponseUsage(event.usage);
        return [...events, { type: incomplete ? "response.incomplete" : "response.completed", response: this.#snapshot() }];
      }
      default:
        return event satisfies never;
    }
  }

  end(): ResponseStreamEvent[] {
    return [];
  }

  /** Marks the response failed (the generation broke off): what is stored of it. */
  fail(message: string): ResponseObject {
    this.#close("incomplete");
    this.#response.status = "failed";
    this.#response.error = { code: "server_error", message };
    return this.#response;
  }

  #appendText(kind: "reasoning" | "message", text: string, logprobs: WireLogprob[] = []): ResponseStreamEvent[] {
    const events: ResponseStreamEvent[] = [];
    let open = this.#open;
    if (open?.item.type !== kind) {
      events.push(...this.#close("completed"));
      const index = this.#response.output.length;
      open =
        kind === "reasoning"
          ? {
              index,
              item: {
                type: "reasoning",
                id: newItemId("rs"),
                summary: [],
                content: [{ type: "reasoning_text", text: "" }],
                status: "in_progress",
              },
            }
          : {
              index,
              item: {
                type: "message",
                id: newItemId("msg"),
                role: "assistant",
                status: "in_progress",
                content: [{ type: "output_text", text: "", annotations: [], logprobs: [] }],
              },
            };
      events.push(this.#add(open));
      const [part] = open.item.content;
      // A copy: the part itself keeps growing before this event is written.
      if (part)
        events.push({
          type: "response.content_part.added",
          item_id: open.item.id,
          output_index: index,
          content_index: 0,
          part: structuredClone(part),
        });
    }
    if (open.item.type === "function_call") return events;
    const part = open.item.content[0];
    if (!part) return events;
    part.text += text;
    const delta = { item_id: open.item.id, output_index: open.index, content_index: 0, delta: text };
    if (part.type === "output_text") {
      this.#response.output_text += text;
      part.logprobs.push(...logprobs);
      events.push({ type: "response.output_text.delta", ...delta, logprobs });
    } else {
      events.push({ type: "response.reasoning_text.delta", ...delta });
    }
    return events;
  }

  /** Opens an item; its `output_item.added` event shows it without content, which `content_part.added` then brings. */
  #add(open: OpenItem): ResponseStreamEvent {
    this.#open = open;
    this.#response.output.push(open.item);
    const item = structuredClone(open.item);
    if (item.type !== "function_call") item.content = [];
    return { type: "response.output_item.added", output_index: open.index, item };
  }

  /** Ends the open item, if any, with its closing events. */
  #close(status: "completed" | "incomplete"): ResponseStreamEvent[] {
    const open = this.#open;
    if (!open) return [];
    this.#open = undefined;
    const { item, index } = open;
    item.status = status;
    const events: ResponseStreamEvent[] = [];
    const ids = { item_id: item.id, output_index: index };
    switch (item.type) {
      case "function_call":
        events.push({ type: "response.function_call_arguments.done", ...ids, name: item.name, arguments: item.arguments });
        break;
      case "message":
      case "reasoning":
        for (const part of item.content) {
          const text = { ...ids, content_index: 0, text: part.text };
          events.push(
            part.type === "output_text"
              ? { type: "response.output_text.done", ...text, logprobs: [...part.logprobs] }
              : { type: "response.reasoning_text.done", ...text },
          );
          events.push({ type: "response.content_part.done", ...ids, content_index: 0, part: { ...part } });
        }
        break;
      default:
        return item satisfies never;
    }
    events.push({ type: "response.output_item.done", output_index: index, item: structuredClone(item) as OutputItem });
    return events;
  }

  /** A copy: events are serialised later, and the response keeps changing meanwhile. */
  #snapshot(): ResponseObject {
    return structuredClone(this.#response);
  }
}
