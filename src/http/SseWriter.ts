import type { FastifyReply } from "fastify";
import { StreamingResponse } from "./StreamingResponse.js";

export interface SseOptions {
  /**
   * Typed events (Anthropic's Messages, OpenAI's Responses): each payload's `type` is also its
   * `event:` name, so every event of the stream (including a shutdown's error event, see
   * StreamingResponse.fail) is named.
   */
  namedEvents?: boolean;
  /** In named mode, the event sent after --stream-keepalive of silence (Anthropic's `{type:"ping"}`) instead of a comment. */
  keepalive?: { type: string };
  /** OpenAI's framing: a stream whose events all went out ends with `data: [DONE]` (one cut by an error does not). */
  doneSentinel?: boolean;
}

/**
 * Writes a server-sent events stream: one `data: <json>` line and a blank line per event, as the
 * OpenAI streaming format and the WHATWG SSE framing require (JSON escapes CR and LF, so each
 * payload is one line); in named mode an `event: <type>` line comes first. Every SSE protocol
 * writes through this class, so each gets the keepalive (--stream-keepalive): a `: keepalive`
 * comment, which SSE parsers skip by definition, or the protocol's own keepalive event.
 */
export class SseWriter extends StreamingResponse {
  readonly #options: SseOptions;

  constructor(reply: FastifyReply, options: SseOptions = {}) {
    super(reply, "text/event-stream; charset=utf-8");
    this.#options = options;
  }

  /** Resolves when the event is handed to the socket; false if the client has gone. */
  async send(payload: unknown): Promise<boolean> {
    return this.write(this.#frame(payload));
  }

  override async finish(): Promise<void> {
    if (this.#options.doneSentinel) await this.write("data: [DONE]\n\n");
    this.end();
  }

  protected override keepaliveText(): string {
    const { keepalive } = this.#options;
    return keepalive === undefined ? ": keepalive\n\n" : this.#frame(keepalive);
  }

  #frame(payload: unknown): string {
    const data = `data: ${JSON.stringify(payload)}\n\n`;
    if (!this.#options.namedEvents) return data;
    const name = (payload as { type?: unknown } | null)?.type;
    // A line break would end the field early and forge another one (WHATWG: a field is one line).
    if (typeof name !== "string" || /[\r\n]/.test(name))
      throw new Error(`A named SSE event needs a one-line string type, got ${JSON.stringify(name)}.`);
    return `event: ${name}\n${data}`;
  }
}
