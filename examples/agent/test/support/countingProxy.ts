// A pass-through HTTP proxy in front of a real server that counts the requests per path, so a
// test can see which calls the app made (for example: that the chat model was not asked).
// A client that disconnects is passed on: the upstream request is destroyed too.
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface CountingProxy {
  url: string;
  count(path: string): number;
  close(): Promise<void>;
}

export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const counts = new Map<string, number>();
  const server = http.createServer((request, response) => {
    const path = new URL(request.url ?? "/", target).pathname;
    counts.set(path, (counts.get(path) ?? 0) + 1);
    const upstream = http.request(new URL(request.url ?? "/", target), { method: request.method, headers: request.headers }, (reply) => {
      response.writeHead(reply.statusCode ?? 502, reply.headers);
      reply.pipe(response);
    });
    upstream.on("error", () => response.destroy());
    response.on("close", () => upstream.destroy());
    request.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    count: (path) => counts.get(path) ?? 0,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
