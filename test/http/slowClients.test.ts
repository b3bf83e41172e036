// Issue 8 §5: clients that send slowly, or hold connections open, are cut off by configured time
// limits and a connection cap, while streamed responses, however long, are not.
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseResponse } from "../support/rawHttp.js";
import { FakeEngine } from "../support/fakeEngine.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

interface Connection {
  socket: net.Socket;
  /** Everything the server sent so far. */
  received(): Buffer;
  /** Resolves with ms since connecting when the server closes the connection (or after `limitMs`, with Infinity). */
  closed(limitMs: number): Promise<number>;
}

async function connect(url: string): Promise<Connection> {
  const { hostname, port } = new URL(url);
  const socket = net.connect({ host: hostname, port: Number(port) });
  const started = Date.now();
  const chunks: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => chunks.push(chunk));
  socket.on("error", () => undefined); // a reset is one way of being closed
  const end = new Promise<number>((resolve) => socket.once("close", () => resolve(Date.now() - started)));
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  return {
    socket,
    received: () => Buffer.concat(chunks),
    closed: (limitMs) => Promise.race([end, new Promise<number>((resolve) => setTimeout(() => resolve(Infinity), limitMs))]),
  };
}

const TIMEOUT_MS = 1000;
/** Generous: the timeout, Node's check interval and a loaded machine's delays fit many times over. */
const CLOSED_WITHIN_MS = 5 * TIMEOUT_MS;

describe("slow clients", () => {
  let server: TestServer;
  const open: net.Socket[] = [];

  beforeAll(async () => {
    server = await startTestServer({
      models: { tiny: await testModelPath("tiny"), "long-tiny": await testModelPath("long-tiny") },
      config: { headersTimeout: TIMEOUT_MS, requestTimeout: TIMEOUT_MS, idleConnectionTimeout: TIMEOUT_MS, contextSize: 100_000 },
    });
  });
  afterAll(async () => {
    for (const socket of open) socket.destroy();
    await server?.close();
  });

  const track = async () => {
    const connection = await connect(server.url);
    open.push(connection.socket);
    return connection;
  };

  it("answers 408 and closes the connection of a client that sends its body too slowly", async () => {
    const connection = await track();
    const body = JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 1 });
    connection.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    // One byte every 200 ms: the body would take many seconds.
    const drip = setInterval(() => connection.socket.writable && connection.socket.write(body[0] ?? ""), 200);
    const closedAfter = await connection.closed(CLOSED_WITHIN_MS * 2);
    clearInterval(drip);
    expect(closedAfter).toBeLessThan(CLOSED_WITHIN_MS);
    expect(parseResponse(connection.received()).status).toBe(408);
  });

  it("answers 408 and closes the connection of a client that never finishes its headers", async () => {
    const connection = await track();
    connection.socket.write("GET /health HTTP/1.1\r\nHost: localhost\r\n");
    const drip = setInterval(() => connection.socket.writable && connection.socket.write("X-Slow: 1\r\n"), 200);
    const closedAfter = await connection.closed(CLOSED_WITHIN_MS * 2);
    clearInterval(drip);
    expect(closedAfter).toBeLessThan(CLOSED_WITHIN_MS);
    expect(parseResponse(connection.received()).status).toBe(408);
  });

  it("closes an idle keep-alive connection", async () => {
    const connection = await track();
    connection.socket.write("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n");
    await expect.poll(() => connection.received().length).toBeGreaterThan(0);
    expect(parseResponse(connection.received()).status).toBe(200);
    expect(await connection.closed(CLOSED_WITHIN_MS * 2)).toBeLessThan(CLOSED_WITHIN_MS);
  });

  it("lets a streamed response run far beyond the request timeout", async () => {
    const controller = new AbortController();
    const response = await postJson(
      `${server.url}/v1/chat/completions`,
      // 32,768 tokens of context, each chunk carrying 20 alternatives: far longer than three
      // request timeouts at any speed this model decodes at.
      {
        model: "long-tiny",
        messages: [{ role: "user", content: "Write a very long essay." }],
        max_tokens: 100_000,
        stream: true,
        logprobs: true,
        top_logprobs: 20,
      },
      { signal: controller.signal },
    );
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    const started = Date.now();
    let bytes = 0;
    // Reads for three request timeouts; the stream must still be flowing at the end.
    while (Date.now() - started < 3 * TIMEOUT_MS) {
      const { done, value } = await reader.read();
      expect(done).toBe(false);
      bytes += value?.length ?? 0;
    }
    expect(bytes).toBeGreaterThan(0);
    controller.abort();
  });
});

describe("connection cap", () => {
  const CAP = 4;
  let server: TestServer;
  const open: net.Socket[] = [];

  beforeAll(async () => {
    // The cap is the HTTP server's, whatever the model: a fake engine.
    server = await startTestServer({ engine: new FakeEngine({ models: ["tiny"] }), config: { maxConnections: CAP } });
  });
  afterAll(async () => {
    for (const socket of open) socket.destroy();
    await server?.close();
  });

  it("closes connections beyond the cap at once, and keeps serving the ones it holds", async () => {
    const held = [];
    for (let i = 0; i < CAP; i++) held.push(await connect(server.url));
    open.push(...held.map((connection) => connection.socket));
    // The first one is a client in the middle of its work: it gets its answers throughout.
    const [working] = held as [Connection];
    working.socket.write("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n");
    await expect.poll(() => working.received().length).toBeGreaterThan(0);

    const refused = [];
    for (let i = 0; i < 3; i++) {
      const extra = await connect(server.url);
      open.push(extra.socket);
      refused.push(extra.closed(CLOSED_WITHIN_MS));
    }
    for (const closedAfter of await Promise.all(refused)) expect(closedAfter).toBeLessThan(CLOSED_WITHIN_MS);

    const before = working.received().length;
    working.socket.write("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n");
    await expect.poll(() => working.received().length).toBeGreaterThan(before);
    expect(parseResponse(working.received().subarray(before)).status).toBe(200);

    // Once held connections go, new clients are served again.
    for (const connection of held) connection.socket.destroy();
    await expect.poll(async () => (await fetch(`${server.url}/health`).catch(() => undefined))?.status, { timeout: 5000 }).toBe(200);
  });
});
