// One streamed chat completion through the playground's session-authenticated route, read from
// the fetch body as server-sent events. Aborting the signal cancels the fetch: the server sees the
// connection close and frees the model's slot at once.
import { ApiError, send } from "./api";

/** A part of a user message with images: its text, or one image as a data: URL. */
export type ContentPart = { type: "text"; text: string } | { type: "image_url"; image_url: { url: string } };

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string | ContentPart[];
}

export type ResponseFormat =
  { type: "text" } | { type: "json_object" } | { type: "json_schema"; json_schema: { name: string; schema: unknown; strict?: boolean } };

export interface ChatBody {
  model: string;
  messages: ChatMessage[];
  temperature?: number;
  max_tokens?: number;
  top_p?: number;
  response_format?: ResponseFormat;
}

export interface StreamResult {
  /** "stop", "length", …; "aborted" when the user stopped it. */
  finishReason: string;
  completionTokens: number | null;
  /** ms from sending to the first content. */
  ttftMs: number | null;
  /** Completion tokens after the first, per second after the first arrived. */
  tokensPerSecond: number | null;
}

export async function streamChat(body: ChatBody, signal: AbortSignal, onText: (text: string) => void): Promise<StreamResult> {
  const started = performance.now();
  let firstAt: number | null = null;
  let finishReason = "unknown";
  let completionTokens: number | null = null;
  const result = (): StreamResult => {
    const end = performance.now();
    const decodeSeconds = firstAt === null ? 0 : (end - firstAt) / 1000;
    return {
      finishReason,
      completionTokens,
      ttftMs: firstAt === null ? null : firstAt - started,
      tokensPerSecond:
        completionTokens !== null && completionTokens > 1 && decodeSeconds > 0 ? (completionTokens - 1) / decodeSeconds : null,
    };
  };
  try {
    const response = await send("POST", "/chat/completions", { ...body, stream: true, stream_options: { include_usage: true } }, signal);
    for await (const data of serverSentData(response)) {
      if (data === "[DONE]") break;
      const event = JSON.parse(data) as StreamEvent;
      if (event.error) throw new ApiError(response.status, event.error.message ?? "the stream failed", event.error.code ?? null);
      if (event.usage) completionTokens = event.usage.completion_tokens;
      const choice = event.choices?.[0];
      if (!choice) continue;
      const text = choice.delta?.content;
      if (text) {
        firstAt ??= performance.now();
        onText(text);
      }
      if (choice.finish_reason) finishReason = choice.finish_reason;
    }
    return result();
  } catch (error) {
    if (signal.aborted) return { ...result(), finishReason: "aborted" };
    throw error;
  }
}

interface StreamEvent {
  choices?: { delta?: { content?: string | null }; finish_reason?: string | null }[];
  usage?: { completion_tokens: number } | null;
  error?: { message?: string; code?: string | null };
}

/** The `data:` payloads of an event stream, as they arrive (events are separated by a blank line). */
export async function* serverSentData(response: Response): AsyncGenerator<string> {
  if (!response.body) return;
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replace(/\r\n?/g, "\n");
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(line.startsWith("data: ") ? 6 : 5))
          .join("\n");
        if (data) yield data;
      }
    }
  } finally {
    // Ends the connection when the caller stops early (after [DONE], or on an error event).
    await reader.cancel().catch(() => {});
  }
}
