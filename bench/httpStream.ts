import http from "node:http";
import type { StreamSample } from "./stats.js";

export interface ChatRequestBody {
  model: string;
  /** Text, or content parts (an image's `image_url`). */
  messages: Array<{ role: string; content: string | ReadonlyArray<Record<string, unknown>> }>;
  max_tokens: number;
  temperature: number;
  [extra: string]: unknown;
}

/**
 * Streams one chat completion from an OpenAI-compatible server and times it as a user would see
 * it: time to the first content, tokens from the usage chunk, and the decode time from the first
 * content to the chunk that ends the choice (finish_reason), which both servers send right after
 * the last token. Not to the last content: tokens that are only part of a character (the test
 * models' random text has many) carry no content of their own in modelhost's stream and a U+FFFD
 * in llama-server's, so the last content came a different number of tokens before the end in each
 * (83 and 104 contents for the same 128 tokens), and counting all 128 over that shorter time
 * flattered whichever stopped earlier.
 *
 * Through node:http, not fetch: the client shares the machine's cores with the server's decode (two
 * threads on two cores here), so every microsecond it spends is taken from whichever server it
 * measures. Reading the same bench-model streams, fetch's web streams cost the client 97 µs of CPU
 * a token and node:http 54 (`process.cpuUsage()` over 10 streams of 128 tokens, twice each).
 * The reply's text comes with it, for conversations that go on.
 * Each stream has a connection of its own: llama-server closes a connection after a streamed
 * response although it answers `Keep-Alive`, and a kept connection failed its next request.
 */
export async function timeHttpStream(
  baseUrl: string,
  body: ChatRequestBody,
  watch: { onContent?: (now: number) => void; signal?: AbortSignal } = {},
): Promise<StreamSample & { text: string; timings?: Record<string, number> }> {
  const started = performance.now();
  let buffer = "";
  let first: number | undefined;
  let last = started;
  let finished: number | undefined;
  let tokens: number | undefined;
  let promptTokens: number | undefined;
  let cachedTokens: number | undefined;
  let deltas = 0;
  let timings: Record<string, number> | undefined;
  let reply = "";
  const onText = (text: string) => {
    buffer += text;
    let end: number;
    while ((end = buffer.indexOf("\n\n")) !== -1) {
      // An event's data lines; comment lines (modelhost's ": keepalive" while a prompt waits or is read) carry none.
      const event = buffer
        .slice(0, end)
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      buffer = buffer.slice(end + 2);
      if (event === "" || event === "[DONE]") continue;
      const chunk = JSON.parse(event) as {
        choices?: Array<{ delta?: { content?: string | null }; finish_reason?: string | null }>;
        usage?: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } | null } | null;
        /** llama-server's figures of the reply, on its last chunk (draft_n, draft_n_accepted, …). */
        timings?: Record<string, number>;
      };
      if (chunk.timings) timings = chunk.timings;
      const content = chunk.choices?.[0]?.delta?.content;
      if (content) {
        const now = performance.now();
        first ??= now;
        last = now;
        deltas++;
        reply += content;
        watch.onContent?.(now);
      }
      if (chunk.choices?.[0]?.finish_reason) finished ??= performance.now();
      if (chunk.usage) {
        ({ completion_tokens: tokens, prompt_tokens: promptTokens } = chunk.usage);
        cachedTokens = chunk.usage.prompt_tokens_details?.cached_tokens;
      }
    }
  };
  await new Promise<void>((resolve, reject) => {
    const request = http.request(
      `${baseUrl}/v1/chat/completions`,
      { method: "POST", agent: false, headers: { "content-type": "application/json" } },
      (response) => {
        response.setEncoding("utf8");
        if (response.statusCode !== 200) {
          let text = "";
          response.on("data", (piece: string) => (text += piece));
          response.on("end", () => reject(new Error(`HTTP ${response.statusCode}: ${text}`)));
        } else {
          response.on("data", (piece: string) => {
            try {
              onText(piece);
            } catch (error) {
              // A reply that does not parse fails this request, not the whole bench.
              response.destroy();
              reject(error as Error);
            }
          });
          response.on("end", resolve);
        }
        response.on("error", reject);
      },
    );
    request.on("error", reject);
    watch.signal?.addEventListener("abort", () => request.destroy(new Error("aborted by the bench")), { once: true });
    request.end(JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }));
  });
  if (first === undefined) throw new Error("the stream carried no content");
  return {
    ttftMs: first - started,
    tokens: tokens ?? deltas,
    decodeMs: (finished ?? last) - first,
    ...(promptTokens !== undefined ? { promptTokens } : {}),
    ...(cachedTokens !== undefined ? { cachedTokens } : {}),
    text: reply,
    ...(timings ? { timings } : {}),
  };
}
