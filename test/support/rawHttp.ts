import net from "node:net";

export interface RawResponse {
  status: number;
  /** Header names lower-cased; the last value wins. */
  headers: Record<string, string>;
  body: string;
}

/**
 * Sends one HTTP/1.1 request written by hand over a fresh socket (`Connection: close`), for
 * request targets and header lists that fetch() normalises away: absolute-form targets, dot
 * segments, repeated headers. Resolves with the parsed response once the server closes.
 */
export async function rawRequest(
  url: string,
  { method = "GET", target, headers = [], body }: { method?: string; target: string; headers?: [string, string][]; body?: string },
): Promise<RawResponse> {
  const { hostname, port, host } = new URL(url);
  // A Host among the headers replaces the URL's (tests of Host checks).
  const ownHost = headers.some(([name]) => name.toLowerCase() === "host");
  const lines = [`${method} ${target} HTTP/1.1`, ...(ownHost ? [] : [`Host: ${host}`]), "Connection: close"];
  for (const [name, value] of headers) lines.push(`${name}: ${value}`);
  if (body !== undefined) lines.push("Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`);
  const socket = net.connect({ host: hostname, port: Number(port) });
  // write, not end: a half-closed socket reads as a client that left, and aborts the request.
  socket.write(`${lines.join("\r\n")}\r\n\r\n${body ?? ""}`);
  const chunks: Buffer[] = [];
  for await (const chunk of socket) chunks.push(chunk as Buffer);
  return parseResponse(Buffer.concat(chunks));
}

export function parseResponse(bytes: Buffer): RawResponse {
  const split = bytes.indexOf("\r\n\r\n");
  const text = bytes.subarray(0, Math.max(0, split)).toString("latin1");
  const [statusLine = "", ...headerLines] = text.split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1]);
  if (!Number.isInteger(status)) throw new Error(`not an HTTP response: ${JSON.stringify(text.slice(0, 200))}`);
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const rest = bytes.subarray(split + 4);
  const body = headers["transfer-encoding"] === "chunked" ? unchunk(rest) : rest;
  return { status, headers, body: body.toString("utf8") };
}

function unchunk(bytes: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (let at = 0; ;) {
    const eol = bytes.indexOf("\r\n", at);
    const size = parseInt(bytes.subarray(at, eol).toString("latin1"), 16);
    if (!(size > 0)) return Buffer.concat(parts);
    parts.push(bytes.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}
