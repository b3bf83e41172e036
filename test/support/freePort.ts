import net from "node:net";

/**
 * A loopback port the kernel just handed out and released. Another process could take it before
 * the caller binds it; on a test machine that race is rare, and the caller then fails loudly (or,
 * as startPostgres does, retries with another).
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}
