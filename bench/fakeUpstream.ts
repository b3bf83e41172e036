// A fake OpenAI-compatible upstream for the gateway workload (bench/gateway.ts), run in a process
// of its own (`node --import tsx bench/fakeUpstream.ts --port N [--chunks 32] [--interval-ms 0]`):
// every streamed chat completion is the same `chunks` content chunks, then the finish reason and
// the usage, written back to back (or `interval-ms` apart); GET /v1/models and /health answer too.
// Its chunks are prepared once, so what it costs a request is node:http's own work: the gateway's
// overhead is measured against an upstream that adds next to nothing.
import http from "node:http";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: { port: { type: "string" }, chunks: { type: "string", default: "32" }, "interval-ms": { type: "string", default: "0" } },
});
const chunkCount = Number(args.chunks);
const intervalMs = Number(args["interval-ms"]);

const created = Math.floor(Date.now() / 1000);
const event = (choices: unknown[], usage?: unknown) =>
  `data: ${JSON.stringify({ id: "chatcmpl-fake", object: "chat.completion.chunk", created, model: "fake", choices, ...(usage ? { usage } : {}) })}\n\n`;
const events = [
  event([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }]),
  // Words of the bench's corpus: about one token each, as a model streams them.
  ...Array.from({ length: chunkCount }, (_, i) =>
    event([{ index: 0, delta: { content: `${["The", " harbour", " town", " woke", " slowly", "."][i % 6]}` }, finish_reason: null }]),
  ),
  event([{ index: 0, delta: {}, finish_reason: "length" }]),
  event([], {
    prompt_tokens: 24,
    completion_tokens: chunkCount,
    total_tokens: 24 + chunkCount,
    prompt_tokens_details: { cached_tokens: 0 },
  }),
  "data: [DONE]\n\n",
].map((text) => Buffer.from(text));
const models = JSON.stringify({ object: "list", data: [{ id: "fake", object: "model", created, owned_by: "bench" }] });

const server = http.createServer((request, response) => {
  if (request.method === "GET") {
    const known = request.url === "/v1/models" || request.url === "/health";
    response.writeHead(known ? 200 : 404, { "content-type": "application/json" }).end(known ? models : "{}");
    return;
  }
  // The request's body is read and dropped: the answer is the same whatever was asked.
  request.resume();
  request.on("end", () => {
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    if (intervalMs <= 0) {
      for (const piece of events) response.write(piece);
      response.end();
      return;
    }
    // The role chunk at once, as a server does when it starts; then a chunk every interval, as a
    // model decodes.
    let next = 0;
    response.write(events[next++]);
    const timer = setInterval(() => {
      response.write(events[next++]);
      if (next === events.length) {
        clearInterval(timer);
        response.end();
      }
    }, intervalMs);
    response.on("close", () => clearInterval(timer));
  });
});
// Keep-alive connections stay open between a client's requests (undici's pool, the bench's agent).
server.keepAliveTimeout = 60_000;
server.listen(Number(args.port), "127.0.0.1");
process.on("SIGTERM", () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
