import type { StreamSample } from "./stats.js";

export interface ChatRequestBody {
  model: string;
  messages: Array<{ role: string; content: string }>;
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
 */
export async function timeHttpStream(baseUrl: string, body: ChatRequestBody): Promise<StreamSample> {
  const started = performance.now();
  const response = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
  });
  if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  const decoder = new TextDecoder();
  let buffer = "";
  let first: number | undefined;
  let last = started;
  let finished: number | undefined;
  let tokens: number | undefined;
  let deltas = 0;
  for await (const bytes of response.body) {
    buffer += decoder.decode(bytes as Uint8Array, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) !== -1) {
      const event = buffer.slice(0, end).replace(/^data: /, "");
      buffer = buffer.slice(end + 2);
      if (event === "[DONE]") continue;
      const chunk = JSON.parse(event) as {
        choices?: Array<{ delta?: { content?: string | null }; finish_reason?: string | null }>;
        usage?: { completion_tokens: number } | null;
        timings?: { predicted_n?: number };
      };
      const content = chunk.choices?.[0]?.delta?.content;
      if (content) {
        const now = performance.now();
        first ??= now;
        last = now;
        deltas++;
      }
      if (chunk.choices?.[0]?.finish_reason) finished ??= performance.now();
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
    }
  }
  if (first === undefined) throw new Error("the stream carried no content");
  return { ttftMs: first - started, tokens: tokens ?? deltas, decodeMs: (finished ?? last) - first };
}
