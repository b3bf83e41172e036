// `serve`: the page (GET /) and the streaming relay (GET /stream?question=…), on node:http.
//
// /stream answers with server-sent events: first `event: sources` (JSON: the chunks considered,
// with similarity and band), then one `data:` event per piece of the answer as the model writes
// it, then `data: [DONE]`. A failure after the stream began is `event: error` with the message,
// then the end. A client that goes away aborts the upstream request at once.
import fs from "node:fs/promises";
import http from "node:http";
import path from "node:path";
import { answer, type AgentDeps } from "./agent.js";
import { APP_DIR } from "./config.js";
import { dataEvent, doneEvent, namedEvent } from "./sse.js";

export const DEFAULT_QUESTION = "What do my documents say?";

/** The page's files: a fixed list, so no request path ever reaches the file system. */
const STATIC: Record<string, { file: string; type: string }> = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/style.css": { file: "style.css", type: "text/css; charset=utf-8" },
};

export function createRelay(deps: AgentDeps): http.Server {
  return http.createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://localhost");
    if (request.method !== "GET" && request.method !== "HEAD") {
      response.writeHead(405, { allow: "GET, HEAD" }).end();
    } else if (url.pathname === "/stream") {
      void relay(url.searchParams.get("question")?.trim() || DEFAULT_QUESTION, deps, response);
    } else if (STATIC[url.pathname]) {
      void serveStatic(STATIC[url.pathname]!, response);
    } else {
      response.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end("not found\n");
    }
  });
}

async function relay(question: string, deps: AgentDeps, response: http.ServerResponse): Promise<void> {
  const upstream = new AbortController();
  // "close" fires when the client goes away (or after we end): before the end, cancel the model's work.
  response.on("close", () => {
    if (!response.writableFinished) upstream.abort();
  });
  response.writeHead(200, {
    "content-type": "text/event-stream", // always UTF-8, by the format's definition
    "cache-control": "no-cache",
    "x-accel-buffering": "no", // nginx and friends: pass each event on at once
    connection: "keep-alive",
  });
  response.flushHeaders();
  try {
    await answer(
      question,
      deps,
      {
        onSources: (matches) => response.write(namedEvent("sources", JSON.stringify(matches))),
        onText: (piece) => response.write(dataEvent(piece)),
      },
      upstream.signal,
    );
    response.end(doneEvent());
  } catch (error) {
    if (upstream.signal.aborted) return; // the client left; nobody to tell
    response.end(namedEvent("error", error instanceof Error ? error.message : String(error)));
  }
}

async function serveStatic({ file, type }: { file: string; type: string }, response: http.ServerResponse): Promise<void> {
  try {
    const body = await fs.readFile(path.join(APP_DIR, "public", file));
    response.writeHead(200, { "content-type": type, "cache-control": "no-cache", "x-content-type-options": "nosniff" }).end(body);
  } catch {
    response.writeHead(500, { "content-type": "text/plain; charset=utf-8" }).end("page missing\n");
  }
}
