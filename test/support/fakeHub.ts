// A loopback stand-in for the Hugging Face hub, laid out like the real one: the model info API
// (`/api/models/OWNER/REPO` with `siblings`), the file-list API (`/api/models/OWNER/REPO/tree/main`
// with each LFS file's SHA-256 and size), and `/OWNER/REPO/resolve/main/FILE`, which answers with a
// 302 to a separate "CDN" server (another origin, as on the real hub) carrying `X-Linked-Etag` and
// `X-Linked-Size`. The CDN serves the bytes with HTTP Range support and counts what it sends; the hub
// also serves files at `/files/NAME`, as a plain web server would (no SHA-256 published).
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface HubFile {
  path: string;
  content: Buffer;
  /** Serve these bytes instead of `content` (whose SHA-256 is still published): a corrupted transfer. */
  corruptWith?: Buffer;
  /** Leave the SHA-256 out of the file list (as for a file not in LFS): only `X-Linked-Etag` carries it. */
  unlisted?: boolean;
}

export interface FakeHub {
  url: string;
  cdnUrl: string;
  /** Bytes of file content sent by the CDN (and the plain-file route), over all requests. */
  bytesServed(): number;
  /** Request lines seen by the hub and the CDN, e.g. `GET /api/models/o/r/tree/main`. */
  requests: { server: "hub" | "cdn"; method: string; path: string; range?: string; authorization?: string }[];
  /** The next file response stops after this many bytes and drops the connection. */
  dropNextAfter(bytes: number): void;
  /** The next file response stops after this many bytes and stalls until the client goes away. */
  stallNextAfter(bytes: number): void;
  close(): Promise<void>;
}

export interface FakeHubOptions {
  /** Repositories that answer 403 unless the request carries `Authorization: Bearer <token>`. */
  gated?: { repos: string[]; token: string };
}

export async function startFakeHub(repos: Record<string, HubFile[]>, options: FakeHubOptions = {}): Promise<FakeHub> {
  let served = 0;
  let cutAfter: { bytes: number; then: "drop" | "stall" } | undefined;
  const requests: FakeHub["requests"] = [];
  const allFiles = Object.values(repos).flat();

  const sendBytes = (request: IncomingMessage, response: ServerResponse, file: HubFile) => {
    const bytes = file.corruptWith ?? file.content;
    const range = /^bytes=(\d+)-$/.exec(request.headers.range ?? "");
    const start = range ? Number(range[1]) : 0;
    if (start >= bytes.length && range) {
      response.writeHead(416, { "Content-Range": `bytes */${bytes.length}` }).end();
      return;
    }
    const body = bytes.subarray(start);
    response.writeHead(range ? 206 : 200, {
      "Content-Type": "application/octet-stream",
      "Content-Length": body.length,
      "Accept-Ranges": "bytes",
      ...(range ? { "Content-Range": `bytes ${start}-${bytes.length - 1}/${bytes.length}` } : {}),
    });
    if (cutAfter !== undefined) {
      const { bytes: count, then } = cutAfter;
      const cut = body.subarray(0, count);
      cutAfter = undefined;
      served += cut.length;
      // Flush the bytes, then close the connection short of Content-Length as a network failure
      // would (FIN rather than RST, so the bytes sent do arrive), or hang like a stalled one.
      response.write(cut, () => {
        if (then === "drop") response.socket?.end();
      });
      return;
    }
    served += body.length;
    response.end(body);
  };

  const hub = createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://hub");
    requests.push({
      server: "hub",
      method: request.method ?? "",
      path: url.pathname,
      ...(request.headers.authorization ? { authorization: request.headers.authorization } : {}),
    });
    const json = (status: number, body: unknown) =>
      response.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify(body));

    const repo = /^\/(?:api\/models\/)?([^/]+\/[^/]+)/.exec(url.pathname)?.[1];
    if (repo && options.gated?.repos.includes(repo) && request.headers.authorization !== `Bearer ${options.gated.token}`) {
      return json(403, { error: `Access to model ${repo} is restricted. You must have access to it and be authenticated to access it.` });
    }

    const api = /^\/api\/models\/([^/]+\/[^/]+)(\/tree\/main|\/revision\/[^/]+)?\/?$/.exec(url.pathname);
    if (api) {
      const files = repos[api[1]!];
      // The real hub answers 401 for a repository that does not exist, as for a private one.
      if (!files) return json(401, { error: "Repository not found" });
      if (api[2] === "/tree/main") {
        return json(
          200,
          files.map((file) => ({
            type: "file",
            oid: sha1(file.content),
            size: file.content.length,
            path: file.path,
            ...(file.unlisted ? {} : { lfs: { oid: sha256(file.content), size: file.content.length, pointerSize: 134 } }),
          })),
        );
      }
      return json(200, { id: api[1], modelId: api[1], siblings: files.map((file) => ({ rfilename: file.path })) });
    }

    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/main\/(.+)$/.exec(url.pathname);
    if (resolve) {
      const file = repos[resolve[1]!]?.find((candidate) => candidate.path === decodeURIComponent(resolve[2]!));
      if (!file) return response.writeHead(404, { "X-Error-Code": "EntryNotFound" }).end("Entry not found");
      const sha = sha256(file.content);
      response
        .writeHead(302, {
          Location: `${cdnUrl}/blobs/${allFiles.indexOf(file)}?signature=secret`,
          "X-Linked-Etag": `"${sha}"`,
          "X-Linked-Size": String(file.content.length),
          ETag: `"${sha}"`,
        })
        .end();
      return;
    }

    const plain = /^\/files\/(.+)$/.exec(url.pathname);
    const plainFile = plain && allFiles.find((file) => file.path === decodeURIComponent(plain[1]!));
    if (plainFile) return sendBytes(request, response, plainFile);
    response.writeHead(404).end("Not found");
  });

  const cdn = createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://cdn");
    requests.push({
      server: "cdn",
      method: request.method ?? "",
      path: url.pathname,
      ...(request.headers.range ? { range: request.headers.range } : {}),
      ...(request.headers.authorization ? { authorization: request.headers.authorization } : {}),
    });
    const file = allFiles[Number(/^\/blobs\/(\d+)$/.exec(url.pathname)?.[1] ?? NaN)];
    if (!file) return response.writeHead(404).end();
    sendBytes(request, response, file);
  });

  const hubUrl = await listen(hub);
  const cdnUrl = await listen(cdn);
  return {
    url: hubUrl,
    cdnUrl,
    bytesServed: () => served,
    requests,
    dropNextAfter: (bytes) => {
      cutAfter = { bytes, then: "drop" };
    },
    stallNextAfter: (bytes) => {
      cutAfter = { bytes, then: "stall" };
    },
    close: async () => {
      await Promise.all([close(hub), close(cdn)]);
    },
  };
}

export function sha256(content: Buffer): string {
  return createHash("sha256").update(content).digest("hex");
}

function sha1(content: Buffer): string {
  return createHash("sha1").update(content).digest("hex");
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function close(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}
