// Issue 8 §1: in the hosted profile the access policy is the matched route's, whatever spelling of
// the request target reached it; a route that declares none cannot be registered; and the engine
// refuses a request that carries no admission.
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import Fastify from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccessService } from "../../src/access/AccessService.js";
import { SqliteAccessStore } from "../../src/access/SqliteAccessStore.js";
import { loadTiers } from "../../src/access/tiers.js";
import { DATABASE_FILE } from "../../src/cli/openAccess.js";
import type { Engine } from "../../src/core/Engine.js";
import { requireAdmission, requireRouteAccess } from "../../src/http/routePolicy.js";
import { rawRequest } from "../support/rawHttp.js";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

interface Route {
  method: string;
  path: string;
}

/** Every route of the app, from Fastify's own route tree (so a route added later is covered too). */
function routesOf(tree: string): Route[] {
  const routes: Route[] = [];
  const prefixes: string[] = [];
  for (const line of tree.split("\n")) {
    const match = /^([│ ├└─]*)(\S+)(?: \(([A-Z, ]+)\))?$/u.exec(line.trimEnd());
    if (!match) continue;
    // Each level is indented by four characters of tree drawing, the first level included.
    const depth = [...(match[1] ?? "")].length / 4 - 1;
    prefixes.length = depth;
    // A static child continues its parent's label (`/api/embed` → `dings`); a wildcard or a
    // parameter starts a segment of its own (`/v1/models` → `*`).
    const label = match[2] ?? "";
    const separator = depth === 0 || prefixes.at(-1)?.endsWith("/") || !/^[*:]/.test(label) ? "" : "/";
    const full = (prefixes.at(-1) ?? "") + separator + label;
    prefixes.push(full);
    for (const method of match[3]?.split(", ") ?? []) if (method !== "HEAD") routes.push({ method, path: full });
  }
  return routes;
}

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

describe("hosted profile: route-level access policy", () => {
  let dataDir: string;
  let server: TestServer;
  let store: SqliteAccessStore;
  let token: string;
  let routes: Route[];

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-route-access-"));
    store = SqliteAccessStore.open(path.join(dataDir, DATABASE_FILE));
    const service = new AccessService(store, await loadTiers(undefined));
    await service.createAccount("mallory", "free");
    token = (await service.createToken("mallory", { name: "test" })).secret;
    server = await startTestServer({
      models: { tiny: await testModelPath("tiny") },
      config: { profile: "hosted", dataDir, tiersFile: "" },
    });
    routes = routesOf(server.app.printRoutes({ commonPrefix: false }));
  });
  afterAll(async () => {
    await server?.close();
    await store?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  const body = (route: Route) =>
    ["POST", "DELETE"].includes(route.method)
      ? JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "hi" }], input: "hi", max_tokens: 1, options: { num_predict: 1 }, source: "tiny", destination: "copy" })
      : undefined;
  /** Model management on the native API: a token is authenticated, then refused (the operator's CLI manages models). */
  const isManagement = (route: Route) => /^\/api\/(pull|push|create|copy|delete|blobs)\b/.test(route.path);
  const concrete = (route: Route) => route.path.replace(/\*$/, "tiny");
  const isPublic = (route: Route) => route.path === "/" || route.path === "/health" || route.method === "OPTIONS";

  it("finds the app's routes", () => {
    expect(routes).toEqual(
      expect.arrayContaining([
        { method: "GET", path: "/" },
        { method: "GET", path: "/health" },
        { method: "GET", path: "/v1/models" },
        { method: "GET", path: "/v1/models/*" },
        { method: "POST", path: "/v1/chat/completions" },
        { method: "POST", path: "/v1/embeddings" },
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
      expect(target.includes("/api/") ? error : error.code).toEqual(target.includes("/api/") ? expect.stringMatching(/API key/) : "invalid_api_key");
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
      for (const target of [concrete(route), `http://any${concrete(route)}`]) {
        const response = await rawRequest(server.url, { method: route.method, target, body: body(route), headers: [["Authorization", `Bearer ${token}`]] });
        expect([route.method, target, response.status]).toEqual([route.method, target, isManagement(route) ? 403 : 200]);
      }
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
  it("refuses a chat or embeddings call that carries no admission", async () => {
    const calls: string[] = [];
    const engine = {
      chat: async () => void calls.push("chat"),
      embed: async () => void calls.push("embed"),
    } as unknown as Engine;
    const guarded = requireAdmission(engine);
    const signal = new AbortController().signal;
    await expect(guarded.chat({ model: "tiny", messages: [] } as never, { signal })).rejects.toMatchObject({ code: "internal_error" });
    await expect(guarded.embed({ model: "tiny" } as never, { signal })).rejects.toMatchObject({ code: "internal_error" });
    expect(calls).toEqual([]);
    const admit = async () => ({ maxOutputTokens: 1, settle: () => undefined });
    await guarded.chat({ model: "tiny", messages: [] } as never, { signal, admit });
    expect(calls).toEqual(["chat"]);
  });
});
