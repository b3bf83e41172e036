import http from "node:http";
import https from "node:https";

/** What UpstreamEngine reads of an upstream's response: a fetch Response has this shape too. */
export interface UpstreamResponse {
  ok: boolean;
  status: number;
  body: AsyncIterable<Uint8Array> | null;
  text(): Promise<string>;
  json(): Promise<unknown>;
}

export interface UpstreamRequestInit {
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: string;
  /** Aborting it ends the request, and the response's body with an error. */
  signal: AbortSignal;
}

/** Sends one request to an upstream (the engine's only way out; tests give `fetch`). */
export type UpstreamTransport = (url: string, init: UpstreamRequestInit) => Promise<UpstreamResponse>;

/** An UpstreamTransport whose kept-alive connections `close` ends. */
export interface ClosableTransport extends UpstreamTransport {
  close(): void;
}

/**
 * The largest reply read whole (an error body, embeddings, rerank scores): 1,000 inputs' 4,096-wide
 * embeddings as JSON are ~80 MiB, and nothing an upstream should send is larger.
 */
const MAX_REPLY_BYTES = 128 * 2 ** 20;

/**
 * Requests over node:http(s), with keep-alive connections per endpoint and a connect timeout.
 * Why not fetch: its WHATWG streams cost the gateway a fifth of its CPU at 64 streams of 32 chunks
 * (bench/gateway.ts, --cpu-prof), where a Node stream hands each socket read over as it is; and
 * fetch has no connect timeout of its own to set (undici's is a fixed 10 s).
 */
export function httpTransport(options: { connectTimeoutMs: number }): ClosableTransport {
  const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
  const send: UpstreamTransport = (url, init) =>
    new Promise((resolve, reject) => {
      const target = new URL(url);
      const secure = target.protocol === "https:";
      const headers = init.body === undefined ? init.headers : { ...init.headers, "content-length": String(Buffer.byteLength(init.body)) };
      const request = (secure ? https : http).request(target, {
        method: init.method,
        headers,
        agent: secure ? agents.https : agents.http,
        signal: init.signal,
      });
      let connecting: NodeJS.Timeout | undefined;
      request.on("socket", (socket) => {
        // A kept-alive socket is connected already.
        if (!socket.connecting) return;
        connecting = setTimeout(
          () => request.destroy(new Error(`no connection within ${options.connectTimeoutMs} ms`)),
          options.connectTimeoutMs,
        );
        socket.once(secure ? "secureConnect" : "connect", () => clearTimeout(connecting));
      });
      request.on("error", (error) => {
        clearTimeout(connecting);
        reject(error);
      });
      request.on("response", (response) => {
        clearTimeout(connecting);
        // Its reader (an async iterator) takes its errors; one that comes before a reader starts (the
        // client gone between the headers and the first read) must not be an uncaught 'error'.
        response.on("error", () => {});
        const status = response.statusCode ?? 0;
        const text = async () => {
          const parts: Buffer[] = [];
          let size = 0;
          for await (const part of response) {
            size += (part as Buffer).length;
            // An upstream is untrusted: its reply is held in memory only up to a bound.
            if (size > MAX_REPLY_BYTES) {
              response.destroy();
              throw new Error(`its reply is over ${MAX_REPLY_BYTES / 2 ** 20} MiB`);
            }
            parts.push(part as Buffer);
          }
          return Buffer.concat(parts).toString("utf8");
        };
        resolve({ ok: status >= 200 && status < 300, status, body: response, text, json: async () => JSON.parse(await text()) });
      });
      request.end(init.body);
    });
  return Object.assign(send, {
    close: () => {
      agents.http.destroy();
      agents.https.destroy();
    },
  });
}
