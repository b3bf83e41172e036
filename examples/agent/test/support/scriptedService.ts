// A scripted OpenAI-compatible test double: a small HTTP server that plays a recorded
// conversation (one scripted reply per chat request, in order) and records every request it
// receives, so tests can check what the app sent. Embeddings come from a function of the text;
// GET /v1/models/{id} lists the models given with their capabilities, and 404s any other.
import http from "node:http";
import type { AddressInfo } from "node:net";

export type ScriptedReply =
  | { kind: "tool_calls"; calls: { name: string; arguments: string }[] }
  | { kind: "text"; pieces: string[] }
  /** Streams these pieces, then fails: the upstream error arrives after the stream began. */
  | { kind: "text_then_error"; pieces: string[] }
  /** Streams these pieces, then waits for the client to go away (recorded in `disconnects`). */
  | { kind: "text_then_hang"; pieces: string[] };

export interface RecordedRequest {
  path: string;
  body: Record<string, unknown> & { messages?: ChatMessage[]; stream?: boolean; input?: string[] | string };
}

export type ContentPart = { type: "text"; text: string } | { type: "image_url"; image_url: { url: string } };

export interface ChatMessage {
  role: string;
  content?: string | null | ContentPart[];
  tool_call_id?: string;
  tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
}

export interface ScriptedService {
  baseURL: string;
  requests: RecordedRequest[];
  /** Streamed chat requests (and hanging model look-ups) whose client went away before the end. */
  disconnects: number;
  chatRequests(): RecordedRequest["body"][];
  close(): Promise<void>;
}

/**
 * @param script the chat replies, in order; a chat request beyond the script gets a 500.
 * @param embedText the vector for one input text (the double normalises it).
 * @param models model id → its `capabilities`, for GET /v1/models/{id}; "hang": no answer until the client goes away (a disconnect)
 */
export async function startScriptedService(
  script: ScriptedReply[],
  embedText: (text: string) => number[],
  models: Record<string, string[] | "hang"> = {},
): Promise<ScriptedService> {
  const requests: RecordedRequest[] = [];
  let nextReply = 0;
  let callCounter = 0;
  let disconnects = 0;
  const server = http.createServer(async (request, response) => {
    if (request.method === "GET") {
      requests.push({ path: request.url ?? "", body: {} });
      const id = decodeURIComponent(request.url?.match(/^\/v1\/models\/([^/?]+)$/)?.[1] ?? "");
      const capabilities = Object.hasOwn(models, id) ? models[id] : undefined;
      if (capabilities === "hang") response.on("close", () => disconnects++);
      else if (capabilities) json(response, { id, object: "model", created: 1_700_000_000, owned_by: "scripted", capabilities });
      else
        json(response, { error: { message: `no model ${id}`, type: "invalid_request_error", param: null, code: "model_not_found" } }, 404);
      return;
    }
    let raw = "";
    for await (const chunk of request) raw += chunk;
    const body = JSON.parse(raw) as RecordedRequest["body"];
    requests.push({ path: request.url ?? "", body });
    if (request.url === "/v1/embeddings") {
      const inputs = Array.isArray(body.input) ? body.input : [String(body.input)];
      // The official client asks for base64 (float32 little-endian) by default, and decodes it.
      const encode = (vector: number[]) =>
        body.encoding_format === "base64" ? Buffer.from(Float32Array.from(vector).buffer).toString("base64") : vector;
      const data = inputs.map((text, index) => ({ object: "embedding", index, embedding: encode(normalise(embedText(text))) }));
      json(response, { object: "list", data, model: body.model, usage: { prompt_tokens: 1, total_tokens: 1 } });
      return;
    }
    const reply = script[nextReply++];
    if (request.url !== "/v1/chat/completions" || !reply) {
      json(response, { error: { message: "not in the script", type: "server_error", param: null, code: null } }, 500);
      return;
    }
    const base = { id: `chatcmpl-${nextReply}`, created: 1_700_000_000, model: body.model };
    if (!body.stream) {
      const toolCalls =
        reply.kind === "tool_calls"
          ? reply.calls.map((call) => ({ id: `call_${++callCounter}`, type: "function", function: call }))
          : undefined;
      const content = reply.kind === "tool_calls" ? null : reply.pieces.join("");
      json(response, {
        ...base,
        object: "chat.completion",
        choices: [
          {
            index: 0,
            message: { role: "assistant", content, ...(toolCalls ? { tool_calls: toolCalls } : {}) },
            finish_reason: toolCalls ? "tool_calls" : "stop",
            logprobs: null,
          },
        ],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      });
      return;
    }
    if (reply.kind === "tool_calls") throw new Error("the script streams only text");
    response.writeHead(200, { "content-type": "text/event-stream" });
    const send = (delta: object, finish: string | null = null) =>
      response.write(
        `data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`,
      );
    send({ role: "assistant", content: "" });
    for (const piece of reply.pieces) send({ content: piece });
    if (reply.kind === "text_then_hang") {
      response.on("close", () => disconnects++);
      return;
    }
    if (reply.kind === "text_then_error") {
      response.end(
        `data: ${JSON.stringify({ error: { message: "the model crashed", type: "server_error", param: null, code: null } })}\n\n`,
      );
      return;
    }
    send({}, "stop");
    response.end("data: [DONE]\n\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    get disconnects() {
      return disconnects;
    },
    chatRequests: () => requests.filter((r) => r.path === "/v1/chat/completions").map((r) => r.body),
    // Idle keep-alive connections would hold close() open for seconds: end them with it.
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function json(response: http.ServerResponse, body: unknown, status = 200): void {
  response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

function normalise(vector: number[]): number[] {
  const length = Math.hypot(...vector);
  return vector.map((value) => value / length);
}

/**
 * Vectors with chosen similarities: `axis(i)` is the unit vector along i, and `between(i, j, s)`
 * a unit vector whose cosine similarity with axis(i) is exactly s (and with axis(j) is √(1−s²)).
 */
export const DIMENSIONS = 8;
export function axis(i: number): number[] {
  return Array.from({ length: DIMENSIONS }, (_, k) => (k === i ? 1 : 0));
}
export function between(i: number, j: number, similarity: number): number[] {
  const vector = axis(i).map((value) => value * similarity);
  vector[j] = Math.sqrt(1 - similarity * similarity);
  return vector;
}
