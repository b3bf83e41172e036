// Issue 28 §1 and §2: a web page may not drive the local runtime. A request whose Origin is
// neither the server's own nor allowed by --cors-origins is refused (403, in the route's own
// error shape) before its body is read; so is a request whose Host is not a loopback name or an
// --allowed-hosts one (DNS rebinding). Requests without an Origin (curl, the SDKs) are unaffected.
import { readdir } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hostMatcher, isLoopbackName } from "../../src/http/browserGuard.js";
import { FakeEngine } from "../support/fakeEngine.js";
import { rawRequest } from "../support/rawHttp.js";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

const EVIL = "https://evil.example";
const chatBody = JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 2 });

/** Generations the server has run, from its own /metrics. */
async function generations(server: TestServer): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  return [...text.matchAll(/^modelhost_generations_total\{[^}]*\} (\d+)/gm)].reduce((sum, match) => sum + Number(match[1]), 0);
}

/** What a page could make a browser send: a simple POST, text/plain, with its Origin. */
function simplePost(server: TestServer, path: string, body: string, origin: string | undefined): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "text/plain", ...(origin === undefined ? {} : { origin }) },
    body,
  });
}

describe("local profile: cross-origin requests (CSRF)", () => {
  let server: TestServer;
  let pullTarget: http.Server;
  let pullHits = 0;
  let pullUrl: string;

  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") } });
    pullTarget = http.createServer((_request, response) => {
      pullHits++;
      response.end("GGUF");
    });
    await new Promise<void>((resolve) => pullTarget.listen(0, "127.0.0.1", resolve));
    pullUrl = `http://127.0.0.1:${(pullTarget.address() as AddressInfo).port}/any.gguf`;
  });
  afterAll(async () => {
    await server?.close();
    await new Promise((resolve) => pullTarget?.close(resolve));
  });

  it("refuses the issue's three reproducers, in each route's error shape, and nothing happens", async () => {
    const filesBefore = (await readdir(server.modelsDir)).sort();
    const generated = await generations(server);
    for (const origin of [EVIL, "null", "http://localhost.evil.example:11434"]) {
      const copy = await simplePost(server, "/api/copy", JSON.stringify({ source: "tiny", destination: "pwned" }), origin);
      expect(copy.status, origin).toBe(403);
      expect(await copy.json()).toEqual({ error: expect.stringContaining("may not call this server") });

      const pull = await simplePost(server, "/api/pull", JSON.stringify({ model: pullUrl, stream: false }), origin);
      expect(pull.status).toBe(403);
      expect(await pull.json()).toEqual({ error: expect.any(String) });

      const chat = await simplePost(server, "/v1/chat/completions", chatBody, origin);
      expect(chat.status).toBe(403);
      expect(await chat.json()).toMatchObject({ error: { code: "origin_not_allowed", type: "invalid_request_error" } });

      const messages = await simplePost(
        server,
        "/v1/messages",
        JSON.stringify({ model: "tiny", max_tokens: 2, messages: [{ role: "user", content: "hi" }] }),
        origin,
      );
      expect(messages.status).toBe(403);
      expect(await messages.json()).toMatchObject({ type: "error", error: { type: "permission_error" } });
    }
    expect((await server.client.models.list()).data.map((model) => model.id)).not.toContain("pwned");
    expect((await readdir(server.modelsDir)).sort()).toEqual(filesBefore);
    expect(pullHits).toBe(0);
    expect(await generations(server)).toBe(generated);
  });

  it("refuses before reading the body: a body that never arrives does not hold the answer", async () => {
    const { port } = new URL(server.url);
    const socket = net.connect({ host: "127.0.0.1", port: Number(port) });
    const head = [
      `POST /v1/chat/completions HTTP/1.1`,
      `Host: 127.0.0.1:${port}`,
      `Origin: ${EVIL}`,
      "Content-Type: text/plain",
      "Content-Length: 100000",
    ];
    socket.write(`${head.join("\r\n")}\r\n\r\n{"model":`);
    const answer = await new Promise<string>((resolve, reject) => {
      let text = "";
      socket.on("data", (chunk: Buffer) => {
        text += chunk.toString("latin1");
        if (text.includes("\r\n\r\n")) resolve(text);
      });
      socket.on("error", reject);
      // --request-timeout is 60 s: an answer within 5 s came without the body.
      setTimeout(() => reject(new Error(`no answer without the body: ${JSON.stringify(text)}`)), 5_000);
    });
    socket.destroy();
    expect(answer).toMatch(/^HTTP\/1\.1 403 /);
  });

  it("refuses a foreign CORS preflight, and answers the allowed origins, its own, and requests without Origin", async () => {
    const preflight = await fetch(`${server.url}/v1/chat/completions`, {
      method: "OPTIONS",
      headers: { origin: EVIL, "access-control-request-method": "POST" },
    });
    expect(preflight.status).toBe(403);
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull();

    for (const origin of [undefined, server.url, "http://localhost:5173", "http://[::1]:3000"]) {
      const chat = await simplePost(server, "/v1/chat/completions", chatBody, origin);
      expect(chat.status, String(origin)).toBe(200);
      if (origin !== undefined && origin !== server.url) expect(chat.headers.get("access-control-allow-origin")).toBe(origin);
    }
    // Read-only routes are refused too: in the local profile the check holds on every route.
    expect((await fetch(`${server.url}/api/tags`, { headers: { origin: EVIL } })).status).toBe(403);
  });
});

// The Host check is the HTTP layer's, whatever the model: these servers run a fake engine.
const engine = () => new FakeEngine({ models: ["tiny"] });

describe("local profile: Host names (DNS rebinding)", () => {
  let server: TestServer;
  let allowing: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ engine: engine() });
    allowing = await startTestServer({ engine: engine(), config: { allowedHosts: ["models.example.com", "*.lan.example"] } });
  });
  afterAll(async () => {
    await server?.close();
    await allowing?.close();
  });

  const tags = (target: TestServer, host: string, headers: [string, string][] = []) =>
    rawRequest(target.url, { target: "/api/tags", headers: [["Host", host], ...headers] });

  it("refuses the issue's reproducer, in the route's error shape, and answers loopback names", async () => {
    const { port } = new URL(server.url);
    const refused = await tags(server, `attacker.example:${port}`);
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body)).toEqual({ error: expect.stringContaining('"attacker.example"') });
    const chat = await rawRequest(server.url, {
      method: "POST",
      target: "/v1/chat/completions",
      headers: [["Host", "attacker.example"]],
      body: chatBody,
    });
    expect(chat.status).toBe(403);
    expect(JSON.parse(chat.body)).toMatchObject({ error: { code: "host_not_allowed" } });
    // The playground's CSRF token is what a rebound page would read first.
    expect((await rawRequest(server.url, { target: "/playground/api/session", headers: [["Host", "attacker.example"]] })).status).toBe(403);

    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, "127.0.0.1", `[::1]:${port}`, `app.localhost:${port}`, "LOCALHOST"]) {
      expect((await tags(server, host)).status, host).toBe(200);
    }
    expect((await tags(server, "models.example.com")).status).toBe(403);
  });

  it("answers the --allowed-hosts as well", async () => {
    expect((await tags(allowing, "models.example.com:443")).status).toBe(200);
    expect((await tags(allowing, "box.lan.example")).status).toBe(200);
    expect((await tags(allowing, "localhost")).status).toBe(200);
    expect((await tags(allowing, "lan.example")).status).toBe(403);
    expect((await tags(allowing, "models.example.com.evil.example")).status).toBe(403);
  });
});

describe("behind a trusted proxy, the forwarded host is the one checked", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ engine: engine(), config: { trustProxy: ["127.0.0.1"], allowedHosts: ["models.example.com"] } });
  });
  afterAll(() => server?.close());

  it("reads X-Forwarded-Host", async () => {
    const forwarded = (host: string) => rawRequest(server.url, { target: "/api/tags", headers: [["X-Forwarded-Host", host]] });
    expect((await forwarded("models.example.com")).status).toBe(200);
    expect((await forwarded("attacker.example")).status).toBe(403);
  });
});

describe("hostMatcher", () => {
  it("checks loopback names only while listening on loopback, and the allowed hosts whenever set", () => {
    const loopback = hostMatcher("127.0.0.1", []);
    expect(loopback?.("localhost")).toBe(true);
    expect(loopback?.("127.0.0.2")).toBe(true);
    expect(loopback?.("[::1]")).toBe(true);
    expect(loopback?.("[::ffff:127.0.0.1]")).toBe(true);
    expect(loopback?.("[::2]")).toBe(false);
    expect(loopback?.("localhost.evil.example")).toBe(false);
    expect(loopback?.("10.0.0.1")).toBe(false);
    expect(hostMatcher("0.0.0.0", [])).toBeUndefined();
    expect(hostMatcher("::", [])).toBeUndefined();
    expect(hostMatcher("localhost", ["*"])).toBeUndefined();
    const everywhere = hostMatcher("0.0.0.0", ["Models.Example.com"]);
    expect(everywhere?.("models.example.com.")).toBe(true);
    expect(everywhere?.("localhost")).toBe(false);
  });

  it("knows loopback names", () => {
    for (const name of ["localhost", "a.b.localhost", "127.0.0.1", "127.255.255.254", "::1", "[::1]", "0:0:0:0:0:0:0:1"])
      expect(isLoopbackName(name), name).toBe(true);
    for (const name of ["localhost.example", "128.0.0.1", "::", "0.0.0.0", "evil", ""]) expect(isLoopbackName(name), name).toBe(false);
  });
});
