// Issue 13, server side, local profile: the playground's page is served from its build directory,
// and its API (session, models, chat) works without sign-in but with the CSRF proof.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeEngine } from "../support/fakeEngine.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";

interface Session {
  profile: string;
  signed_in: boolean;
  csrf_token?: string;
}

const messages = [{ role: "user" as const, content: "Hello there." }];

describe("playground, local profile", () => {
  let server: TestServer;
  let pageDir: string;
  let csrf: string;

  beforeAll(async () => {
    // A page as Vite builds one: index.html and content-hashed files under assets/.
    pageDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-page-"));
    await mkdir(path.join(pageDir, "assets"));
    await writeFile(
      path.join(pageDir, "index.html"),
      '<!doctype html><title>modelhost playground</title><script type="module" src="/playground/assets/index-Ab12Cd.js"></script>',
    );
    await writeFile(path.join(pageDir, "assets", "index-Ab12Cd.js"), 'console.log("page");');
    await writeFile(path.join(pageDir, "favicon.svg"), "<svg xmlns='http://www.w3.org/2000/svg'/>");
    // The page, the session and the CSRF proof are the server's, whatever the model: a fake engine,
    // whose long reply at a token every 5 ms keeps a stream open until its client leaves.
    const engine = new FakeEngine({ models: ["tiny"], reply: { text: "word ".repeat(2000), tokenMs: 5 } });
    server = await startTestServer({ engine, playgroundDir: pageDir, config: { parallel: 2 } });
    const session = (await (await fetch(`${server.url}/playground/api/session`)).json()) as Session;
    csrf = session.csrf_token ?? "";
  });
  afterAll(async () => {
    await server?.close();
    await rm(pageDir, { recursive: true, force: true });
  });

  const chat = (body: object, headers: Record<string, string>) =>
    postJson(
      `${server.url}/playground/api/chat/completions`,
      { model: "tiny", messages, max_tokens: 2, ...body },
      { headers: { "content-type": "application/json", ...headers } },
    );

  it("serves the page for its routes, assets with a long cache, and keeps GET / as Ollama's", async () => {
    for (const url of ["/playground", "/playground/", "/playground/tokens", "/playground/usage/today"]) {
      const response = await fetch(`${server.url}${url}`);
      expect(response.status, url).toBe(200);
      expect(response.headers.get("content-type"), url).toMatch(/^text\/html/);
      expect(response.headers.get("cache-control"), url).toBe("no-cache");
      expect(await response.text(), url).toContain("modelhost playground");
    }
    const asset = await fetch(`${server.url}/playground/assets/index-Ab12Cd.js`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get("content-type")).toMatch(/javascript/);
    expect(asset.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(await asset.text()).toBe('console.log("page");');
    const icon = await fetch(`${server.url}/playground/favicon.svg`);
    expect(icon.headers.get("content-type")).toMatch(/^image\/svg\+xml/);
    expect(icon.headers.get("cache-control")).toBe("no-cache");

    const root = await fetch(`${server.url}/`);
    expect(await root.text()).toBe("Ollama is running");
  });

  it("never serves a file outside the page's directory", async () => {
    await writeFile(path.join(path.dirname(pageDir), "modelhost-secret.txt"), "secret");
    for (const target of [
      "/playground/../modelhost-secret.txt",
      "/playground/%2e%2e/modelhost-secret.txt",
      "/playground/assets/..%2f..%2fmodelhost-secret.txt",
    ]) {
      const text = await rawGet(server.url, target);
      expect(text, target).not.toContain("secret");
    }
    await rm(path.join(path.dirname(pageDir), "modelhost-secret.txt"));
  });

  it("answers unknown API URLs with a JSON 404, not the page", async () => {
    const response = await fetch(`${server.url}/playground/api/nothing-here`);
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ error: { code: "not_found" } });
  });

  it("says who is signed in: everyone, locally, with a CSRF token", async () => {
    const session = (await (await fetch(`${server.url}/playground/api/session`)).json()) as Session;
    expect(session).toEqual({ profile: "local", signed_in: true, csrf_token: csrf });
    expect(csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it("lists the same models as /v1/models", async () => {
    const [playground, v1] = await Promise.all([fetch(`${server.url}/playground/api/models`), fetch(`${server.url}/v1/models`)]);
    expect(playground.status).toBe(200);
    expect(await playground.json()).toEqual(await v1.json());
  });

  it("answers chat completions as /v1 does, through the official client", async () => {
    const client = new OpenAI({
      baseURL: `${server.url}/playground/api`,
      apiKey: "unused",
      defaultHeaders: { "x-csrf-token": csrf },
      maxRetries: 0,
    });
    const reply = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 3 });
    expect(reply.object).toBe("chat.completion");
    expect(reply.usage?.completion_tokens).toBe(3);
    const stream = await client.chat.completions.create({
      model: "tiny",
      messages,
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]?.choices[0]?.delta.role).toBe("assistant");
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(3);
  });

  it("refuses a state-changing request without the CSRF proof or from another origin", async () => {
    // A foreign origin is refused before the playground's own check (browserGuard.ts); an origin
    // --cors-origins allows (loopback, any port) still is not the playground's own.
    const cases: Array<[string, Record<string, string>, string]> = [
      ["no header", {}, "csrf_rejected"],
      ["empty header", { "x-csrf-token": "" }, "csrf_rejected"],
      ["wrong token", { "x-csrf-token": csrf.slice(0, -1) + (csrf.endsWith("A") ? "B" : "A") }, "csrf_rejected"],
      ["foreign origin", { "x-csrf-token": csrf, origin: "http://evil.example" }, "origin_not_allowed"],
      ["same host, other port", { "x-csrf-token": csrf, origin: "http://127.0.0.1:1" }, "csrf_rejected"],
      ["opaque origin", { "x-csrf-token": csrf, origin: "null" }, "origin_not_allowed"],
    ];
    for (const [what, headers, code] of cases) {
      const response = await chat({}, headers);
      expect(response.status, what).toBe(403);
      expect(await response.json(), what).toMatchObject({ error: { code, type: "invalid_request_error" } });
    }
    const own = await chat({}, { "x-csrf-token": csrf, origin: server.url });
    expect(own.status).toBe(200);
  });

  it("frees the slot when the client of a streamed chat disconnects", async () => {
    const controller = new AbortController();
    const open = await postJson(
      `${server.url}/playground/api/chat/completions`,
      { model: "tiny", messages, max_tokens: 100_000, stream: true },
      {
        headers: { "content-type": "application/json", "x-csrf-token": csrf },
        signal: controller.signal,
      },
    );
    expect(open.headers.get("content-type")).toMatch(/^text\/event-stream/);
    await open.body!.getReader().read();
    await expect.poll(slots).toMatchObject({ active: 1 });
    controller.abort();
    await expect.poll(slots).toEqual({ active: 0, queued: 0 });
  });

  it("says tokens, usage and sign-in are the hosted profile's", async () => {
    const requests: Array<[string, string]> = [
      ["GET", "/playground/api/tokens"],
      ["POST", "/playground/api/tokens"],
      ["DELETE", "/playground/api/tokens/tok_x"],
      ["GET", "/playground/api/usage"],
      ["POST", "/playground/api/sign-in"],
    ];
    for (const [method, url] of requests) {
      const response = await fetch(`${server.url}${url}`, {
        method,
        headers: { "x-csrf-token": csrf, "content-type": "application/json" },
        ...(method === "POST" ? { body: "{}" } : {}),
      });
      expect(response.status, url).toBe(404);
      expect(((await response.json()) as { error: { message: string } }).error.message, url).toMatch(/hosted profile/);
    }
  });

  const slots = async () => {
    const health = (await (await fetch(`${server.url}/health`)).json()) as {
      loaded: Array<{ id: string; active: number; queued: number }>;
    };
    const model = health.loaded.find((entry) => entry.id === "tiny");
    return { active: model?.active ?? 0, queued: model?.queued ?? 0 };
  };
});

describe("playground, page not built", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ models: {}, playgroundDir: path.join(os.tmpdir(), "modelhost-no-such-page") });
  });
  afterAll(() => server?.close());

  it("says how to build it", async () => {
    const response = await fetch(`${server.url}/playground/`);
    expect(response.status).toBe(503);
    expect(await response.text()).toMatch(/npm run build/);
  });
});

/** A GET with the target sent exactly as written (fetch would normalise the dots away). */
function rawGet(base: string, target: string): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: hostname, port, path: target, method: "GET" }, (response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => (body += chunk));
      response.on("end", () => resolve(`${response.statusCode} ${body}`));
    });
    request.on("error", reject);
    request.end();
  });
}
