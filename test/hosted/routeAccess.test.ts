// Issue 8 §1: in the hosted profile the access policy is the matched route's, whatever spelling of
// the request target reached it; a route that declares none cannot be registered; and the engine
// refuses a request that carries no admission.
import Fastify from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openResponseStore } from "../../src/cli/openAccess.js";
import { requireAdmission } from "../../src/http/requireAdmission.js";
import { requireRouteAccess } from "../../src/http/routeAccess.js";
import type { ResponseStore } from "../../src/storedResponses/ResponseStore.js";
import { chatRequest, FakeEngine } from "../support/fakeEngine.js";
import { openHosted, type Hosted } from "../support/hostedServer.js";
import { rawRequest } from "../support/rawHttp.js";
import type { TestServer } from "../support/startTestServer.js";
import { routesOf, type Route } from "../support/routeTree.js";

/** The same route, spelled every way a router, a proxy or a client might spell it. */
function targetForms(route: string): string[] {
  const [, first = "", ...rest] = route.split("/");
  const tail = rest.join("/");
  const encoded = [...first].map((char) => `%${char.charCodeAt(0).toString(16)}`).join("");
  return [
    route,
    `http://any${route}`,
    `http://127.0.0.1:1${route}?x=1`,
    `/${encoded}/${tail}`,
    `/%76${first.slice(1)}/${tail}`,
    `/${first}/${tail.replaceAll("/", "%2F")}`,
    `/${first}/${[...tail].map((char) => (char === "/" ? char : `%${char.charCodeAt(0).toString(16).toUpperCase()}`)).join("")}`,
    `/${route}`,
    route.replaceAll("/", "//"),
    `${route}/`,
    `${route}.`,
    `/${first}./${tail}`,
    `/x/..${route}`,
    `/${first}/./${tail}`,
    `/${first}/x/../${tail}`,
    `/${first}/%2e%2e/${first}/${tail}`,
    route.toUpperCase(),
    `/${first.toUpperCase()}/${tail}`,
    `${route};x=1`,
    `/${first};x=1/${tail}`,
    `${route}?`,
    `${route}#x`,
  ];
}

// The policy is the routes', whatever the model: a fake engine serves them, a chat model and a reranking one.
describe("hosted profile: route-level access policy", () => {
  let hosted: Hosted;
  let server: TestServer;
  let token: string;
  let routes: Route[];
  let responses: ResponseStore;
  let accountId: string;
  let storedResponses = 0;

  beforeAll(async () => {
    // Every caller route is called a few times in a minute: more than the built-in free tier's 15.
    hosted = await openHosted({ tiers: { default: "free", tiers: { free: { requestsPerMinute: 10_000 } } } });
    ({ id: accountId, token } = await hosted.newAccount("free", { name: "mallory" }));
    responses = await openResponseStore({ profile: "hosted", dataDir: hosted.dataDir, databaseUrl: "" });
    server = await hosted.serve({ engine: new FakeEngine({ models: ["tiny", { id: "rerank", capabilities: ["rerank"] }] }) });
    routes = routesOf(server.app);
  });
  afterAll(async () => {
    await hosted?.close();
    await responses?.close();
  });

  const body = (route: Route) =>
    ["POST", "DELETE"].includes(route.method)
      ? JSON.stringify({
          // Reranking needs a reranking model; every other route takes the chat model.
          model: route.path.endsWith("/rerank") ? "rerank" : "tiny",
          messages: [{ role: "user", content: "hi" }],
          input: "hi",
          ...(route.path === "/v1/completions" ? { prompt: "hi" } : {}),
          max_tokens: 1,
          max_output_tokens: 1,
          options: { num_predict: 1 },
          source: "tiny",
          destination: "copy",
          content: "hi",
          tokens: [1],
          query: "hi",
          documents: ["hello"],
        })
      : undefined;
  /** Model management on the native API: a token is authenticated, then refused (the operator's CLI manages models). */
  const isManagement = (route: Route) => /^\/api\/(pull|push|create|copy|delete|blobs)\b/.test(route.path);
  const concrete = (route: Route) => route.path.replace(/\*$/, "tiny");
  /** A route's path with a stored response of the token's account for `:id` (written to the store directly: no request spent on it). */
  const withResponse = async (route: Route) => {
    if (!route.path.includes(":id")) return concrete(route);
    const id = `resp_route${++storedResponses}`;
    await responses.save({ id, owner: accountId, createdAt: Date.now(), expiresAt: Date.now() + 60_000, response: { id }, input: [] });
    return route.path.replace(":id", id);
  };
  /** The browser playground's routes have a door of their own (a session cookie, never a token): see the last test. */
  const isPlayground = (route: Route) => route.path === "/playground" || route.path.startsWith("/playground/");
  const isPublic = (route: Route) => route.path === "/" || route.path === "/health" || route.method === "OPTIONS" || isPlayground(route);

  it("finds the app's routes", () => {
    expect(routes).toEqual(
      expect.arrayContaining([
        { method: "GET", path: "/" },
        { method: "GET", path: "/health" },
        { method: "GET", path: "/v1/models" },
        { method: "GET", path: "/v1/models/*" },
        { method: "POST", path: "/v1/chat/completions" },
        { method: "POST", path: "/v1/embeddings" },
        { method: "POST", path: "/v1/rerank" },
        { method: "POST", path: "/rerank" },
        { method: "POST", path: "/tokenize" },
        { method: "POST", path: "/detokenize" },
        { method: "GET", path: "/v1/usage" },
      ]),
    );
  });

  it("answers 401 to every tokenless request to a caller route, however its target is spelled", async () => {
    const answered: string[] = [];
    for (const route of routes.filter((route) => !isPublic(route))) {
      for (const target of targetForms(concrete(route))) {
        for (const method of route.method === "GET" ? ["GET", "HEAD"] : [route.method]) {
          const response = await rawRequest(server.url, { method, target, body: body(route) });
          answered.push(`${method} ${target} → ${response.status}`);
        }
      }
    }
    // Malformed percent-encoding never reaches a route: Fastify answers 400 itself, before any handler.
    const leaks = answered.filter((line) => !/→ 401$/.test(line));
    expect(leaks).toEqual([]);
    expect(answered.length).toBeGreaterThan(100);
  });

  it("answers 401 to tokenless requests for unknown URLs, in the OpenAI shape (the native one under /api)", async () => {
    for (const target of ["/nope", "/v2/models", "http://any/api/nope", "/%zz"]) {
      const response = await rawRequest(server.url, { target });
      expect([target, response.status]).toEqual([target, target === "/%zz" ? 400 : 401]);
      if (response.status !== 401) continue;
      const error = JSON.parse(response.body).error;
      // The native API's clients read `{"error": "…"}`; everyone else gets OpenAI's object with its code.
      expect(target.includes("/api/") ? error : error.code).toEqual(
        target.includes("/api/") ? expect.stringMatching(/API key/) : "invalid_api_key",
      );
    }
  });

  it("keeps public routes public, in any form that reaches them", async () => {
    for (const target of ["/", "/health", "http://any/health", "/%68ealth", "/health?x=1"]) {
      const response = await rawRequest(server.url, { target });
      expect([target, response.status]).toEqual([target, 200]);
    }
  });

  it("still serves a valid token on every caller route", async () => {
    for (const route of routes.filter((route) => !isPublic(route))) {
      for (const target of [await withResponse(route), `http://any${await withResponse(route)}`]) {
        const response = await rawRequest(server.url, {
          method: route.method,
          target,
          body: body(route),
          headers: [["Authorization", `Bearer ${token}`]],
        });
        expect([route.method, target, response.status]).toEqual([route.method, target, isManagement(route) ? 403 : 200]);
      }
    }
  });

  it("gives a token nothing on the playground's session routes", async () => {
    const sessionRoutes = routes.filter(
      (route) => route.path.startsWith("/playground/api/") && !/\/(session|sign-in|sign-out|\*)$/.test(route.path),
    );
    expect(sessionRoutes).toEqual(
      expect.arrayContaining([
        { method: "POST", path: "/playground/api/chat/completions" },
        { method: "GET", path: "/playground/api/tokens" },
      ]),
    );
    for (const route of sessionRoutes) {
      const target = route.path.replace(":id", "tok_x");
      const response = await rawRequest(server.url, {
        method: route.method,
        target,
        body: body(route),
        headers: [["Authorization", `Bearer ${token}`]],
      });
      expect([route.method, target, response.status]).toEqual([route.method, target, 401]);
      expect(JSON.parse(response.body).error.code).toBe("not_signed_in");
    }
  });

  it("refuses two Authorization headers as ambiguous, even when both are valid", async () => {
    const headers: [string, string][] = [
      ["Authorization", `Bearer ${token}`],
      ["authorization", `Bearer ${token}`],
    ];
    const response = await rawRequest(server.url, { target: "/v1/models", headers });
    expect(response.status).toBe(401);
    const error = JSON.parse(response.body).error;
    expect(error.code).toBe("invalid_api_key");
    expect(error.message).toMatch(/more than one Authorization header/);
    expect(error.message).not.toContain(token);
  });
});

describe("route access policy, default deny", () => {
  it("refuses to register a route that declares no access policy", async () => {
    const app = Fastify();
    requireRouteAccess(app);
    app.get("/ok", { config: { access: "public" } }, async () => "ok");
    expect(() => app.get("/undeclared", async () => "leak")).toThrow(/GET \/undeclared declares no config.access/);
  });
});

describe("engine admission in the hosted profile, fail closed", () => {
  it("refuses a chat, embeddings, rerank or tokenizer call that carries no admission", async () => {
    const engine = new FakeEngine({ models: ["tiny"] });
    const guarded = requireAdmission(engine);
    const signal = new AbortController().signal;
    await expect(guarded.chat({ model: "tiny", messages: [] } as never, { signal })).rejects.toMatchObject({ code: "internal_error" });
    await expect(guarded.embed({ model: "tiny" } as never, { signal })).rejects.toMatchObject({ code: "internal_error" });
    await expect(guarded.rerank({ model: "tiny" } as never, { signal })).rejects.toMatchObject({ code: "internal_error" });
    await expect(guarded.tokenize({ model: "tiny" } as never, { signal })).rejects.toMatchObject({ code: "internal_error" });
    await expect(guarded.detokenize({ model: "tiny" } as never, { signal })).rejects.toMatchObject({ code: "internal_error" });
    expect(engine.calls).toEqual([]);
    const admit = async () => ({ maxOutputTokens: 1, settle: () => undefined });
    await (await guarded.chat(chatRequest({ model: "tiny" }), { signal, admit })).return();
    expect(engine.calls).toEqual(["chat"]);
  });
});
