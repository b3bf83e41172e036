// Issue 16, OpenAPI: GET /openapi.json is generated from the zod schemas the routes validate
// with; every registered route is in it (a route cannot be registered without its description);
// responses recorded here from the real server, local and hosted, validate against it.
import { readFile } from "node:fs/promises";
import Fastify from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { ApiDescription, openApiPath } from "../../src/http/openapi.js";
import { chatCompletionRequestSchema } from "../../src/protocols/openai/schemas.js";
import { FakeEngine } from "../support/fakeEngine.js";
import { startFakeHub, type FakeHub } from "../support/fakeHub.js";
import { openHosted, type Hosted } from "../support/hostedServer.js";
import { validatorOf, type OpenApiDocument } from "../support/openApiValidator.js";
import { routesOf } from "../support/routeTree.js";
import { postJson, readNamedEvents, readSseEvents, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

/** The NDJSON lines of a response. */
async function readLines(response: Response): Promise<Array<Record<string, unknown>>> {
  return (await response.text())
    .trimEnd()
    .split("\n")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The methods an OpenAPI path item has; a catch-all route's others (PROPFIND…) cannot be described. */
const DESCRIBABLE = new Set(["GET", "PUT", "POST", "DELETE", "OPTIONS", "PATCH", "TRACE"]);

const messages = [{ role: "user" as const, content: "Hello there." }];

describe("GET /openapi.json", () => {
  let server: TestServer;
  let document: OpenApiDocument;
  /** The hub /api/pull pulls from: a model, and one whose download proves corrupt. */
  let hub: FakeHub;
  const { ajv, expectValid } = validatorOf(() => document);

  beforeAll(async () => {
    const tiny = await readFile(await testModelPath("tiny"));
    hub = await startFakeHub({
      "test/Tiny-GGUF": [{ path: "Tiny-Q4_K_M.gguf", content: tiny }],
      "test/Corrupt-GGUF": [{ path: "Corrupt-Q8_0.gguf", content: tiny, corruptWith: Buffer.alloc(tiny.length) }],
    });
    server = await startTestServer({
      models: { tiny: await testModelPath("tiny"), embed: await testModelPath("embed-tiny"), rerank: await testModelPath("rerank-tiny") },
      config: { hfEndpoint: hub.url },
    });
    const response = await fetch(`${server.url}/openapi.json`);
    expect(response.status).toBe(200);
    document = (await response.json()) as OpenApiDocument;
  });
  afterAll(async () => {
    await server?.close();
    await hub?.close();
  });

  it("describes every route the app has registered", () => {
    expect(document.openapi).toBe("3.1.0");
    const routes = routesOf(server.app).filter((route) => route.path !== "*" && DESCRIBABLE.has(route.method));
    expect(routes.length).toBeGreaterThan(30);
    const missing = routes.filter((route) => !document.paths[openApiPath(route.path)]?.[route.method.toLowerCase()]?.summary);
    expect(missing).toEqual([]);
  });

  it("takes request bodies from the very schemas the routes validate with", () => {
    const body = document.paths["/v1/chat/completions"]?.post?.requestBody?.content["application/json"].schema;
    expect(body).toEqual(z.toJSONSchema(chatCompletionRequestSchema, { io: "input", unrepresentable: "any", target: "draft-2020-12" }));
    expect(document.paths["/api/chat"]?.post?.requestBody).toBeDefined();
    expect(document.paths["/v1/models/{path}"]?.get).toBeDefined();
  });

  it("validates recorded responses: chat completion, chunks, models, embeddings, native chat and stream lines, errors", async () => {
    const completion = await postJson(`${server.url}/v1/chat/completions`, { model: "tiny", messages, max_tokens: 4 });
    expectValid("PostV1ChatCompletions", await completion.json());

    const streamed = await postJson(`${server.url}/v1/chat/completions`, {
      model: "tiny",
      messages,
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    const events = await readSseEvents(streamed);
    expect(events.at(-1)).toBe("[DONE]");
    for (const event of events.slice(0, -1)) expectValid("PostV1ChatCompletionsEvent", JSON.parse(event));

    expectValid("GetV1Models", await (await fetch(`${server.url}/v1/models`)).json());
    expectValid("GetV1Models", await (await fetch(`${server.url}/playground/api/models`)).json());
    expectValid("GetV1ModelsPath", await (await fetch(`${server.url}/v1/models/tiny`)).json());
    expectValid("PostV1Embeddings", await (await postJson(`${server.url}/v1/embeddings`, { model: "embed", input: ["a", "b"] })).json());
    expectValid(
      "PostV1Embeddings",
      await (await postJson(`${server.url}/v1/embeddings`, { model: "embed", input: "a", encoding_format: "base64" })).json(),
    );

    for (const [url, body] of [
      ["/v1/chat/completions", { model: "nope", messages }],
      ["/v1/chat/completions", { model: "tiny", messages: [] }],
      ["/v1/embeddings", "{not json"],
    ] as const) {
      const error = await postJson(`${server.url}${url}`, body);
      expect(error.status).toBeGreaterThanOrEqual(400);
      expectValid("OpenAIError", await error.json());
    }
    // The native API: one object, and each NDJSON line of a stream.
    expectValid(
      "PostApiChat",
      await (await postJson(`${server.url}/api/chat`, { model: "tiny", messages, stream: false, options: { num_predict: 4 } })).json(),
    );
    const lines = (
      await (await postJson(`${server.url}/api/generate`, { model: "tiny", prompt: "Hi", options: { num_predict: 4 } })).text()
    )
      .trim()
      .split("\n");
    expect(lines.length).toBeGreaterThan(1);
    for (const line of lines) expectValid("PostApiGenerateEvent", JSON.parse(line));

    const nativeError = await postJson(`${server.url}/api/chat`, { model: "nope", messages });
    expect(nativeError.status).toBe(404);
    expectValid("OllamaError", await nativeError.json());
  });

  it("validates recorded responses: messages, legacy completions, the Responses API and its stored responses", async () => {
    const anthropic = { model: "tiny", max_tokens: 4, messages };
    expectValid("PostV1Messages", await (await postJson(`${server.url}/v1/messages`, anthropic)).json());
    const named = await readNamedEvents(await postJson(`${server.url}/v1/messages`, { ...anthropic, stream: true }));
    expect(named.map((event) => event.event)).toEqual(
      expect.arrayContaining(["message_start", "ping", "content_block_delta", "message_delta", "message_stop"]),
    );
    for (const { data } of named) expectValid("PostV1MessagesEvent", data);
    const anthropicError = await postJson(`${server.url}/v1/messages`, { ...anthropic, model: "nope" });
    expect(anthropicError.status).toBe(404);
    expectValid("AnthropicError", await anthropicError.json());

    const legacy = { model: "tiny", prompt: "Once upon", max_tokens: 4 };
    expectValid("PostV1Completions", await (await postJson(`${server.url}/v1/completions`, { ...legacy, logprobs: 2, echo: true })).json());
    const chunks = await readSseEvents(
      await postJson(`${server.url}/v1/completions`, { ...legacy, stream: true, logprobs: 1, stream_options: { include_usage: true } }),
    );
    expect(chunks.at(-1)).toBe("[DONE]");
    for (const chunk of chunks.slice(0, -1)) expectValid("PostV1CompletionsEvent", JSON.parse(chunk));

    const created = (await (
      await postJson(`${server.url}/v1/responses`, {
        model: "tiny",
        input: "Hi",
        max_output_tokens: 4,
        include: ["message.output_text.logprobs"],
        top_logprobs: 2,
      })
    ).json()) as { id: string };
    expectValid("PostV1Responses", created);
    const typed = await readNamedEvents(
      await postJson(`${server.url}/v1/responses`, { model: "tiny", input: "Hi", max_output_tokens: 4, stream: true, store: false }),
    );
    expect(typed.map((event) => event.event)).toEqual(
      expect.arrayContaining(["response.created", "response.output_text.delta", "response.incomplete"]),
    );
    for (const { data } of typed) expectValid("PostV1ResponsesEvent", data);
    expectValid("GetV1ResponsesId", await (await fetch(`${server.url}/v1/responses/${created.id}`)).json());
    expectValid("GetV1ResponsesIdInputItems", await (await fetch(`${server.url}/v1/responses/${created.id}/input_items`)).json());
    expectValid("DeleteV1ResponsesId", await (await fetch(`${server.url}/v1/responses/${created.id}`, { method: "DELETE" })).json());
  });

  it("validates recorded responses: tokenizer, rerank, native model listing and details, health", async () => {
    for (const path of ["/tokenize", "/v1/tokenize"]) {
      const component = path === "/tokenize" ? "PostTokenize" : "PostV1Tokenize";
      expectValid(component, await (await postJson(`${server.url}${path}`, { model: "tiny", content: "a 🎉" })).json());
      // With pieces: a piece that is part of a character comes as its bytes.
      const pieces = (await (await postJson(`${server.url}${path}`, { model: "tiny", content: "a 🎉", with_pieces: true })).json()) as {
        tokens: { piece: unknown }[];
      };
      expect(pieces.tokens.some((token) => Array.isArray(token.piece))).toBe(true);
      expectValid(component, pieces);
    }
    expectValid("PostDetokenize", await (await postJson(`${server.url}/detokenize`, { model: "tiny", tokens: [1, 2, 3] })).json());
    expectValid("PostV1Detokenize", await (await postJson(`${server.url}/v1/detokenize`, { model: "tiny", tokens: [1, 2, 3] })).json());
    const rerank = { model: "rerank", query: "lighthouse", documents: ["a lighthouse keeper", { text: "soup" }] };
    expectValid("PostV1Rerank", await (await postJson(`${server.url}/v1/rerank`, { ...rerank, return_documents: true })).json());
    expectValid("PostRerank", await (await postJson(`${server.url}/rerank`, { ...rerank, top_n: 1 })).json());

    expectValid("GetApiTags", await (await fetch(`${server.url}/api/tags`)).json());
    expectValid("PostApiShow", await (await postJson(`${server.url}/api/show`, { model: "tiny" })).json());
    const health = await fetch(`${server.url}/health`);
    expect(health.status).toBe(200);
    const status = (await health.json()) as { loaded: unknown[] };
    expect(status.loaded.length).toBeGreaterThan(0);
    expectValid("GetHealth", status);
  });

  it("validates recorded responses: token counts, native version, loaded models, embeddings, pulls, the playground's session", async () => {
    expectValid(
      "PostV1MessagesCountTokens",
      await (await postJson(`${server.url}/v1/messages/count_tokens`, { model: "tiny", messages })).json(),
    );
    expectValid("GetApiVersion", await (await fetch(`${server.url}/api/version`)).json());
    // A generate request without a prompt loads the model: /api/ps has one to list.
    await readLines(await postJson(`${server.url}/api/generate`, { model: "tiny" }));
    const ps = (await (await fetch(`${server.url}/api/ps`)).json()) as { models: unknown[] };
    expect(ps.models.length).toBeGreaterThan(0);
    expectValid("GetApiPs", ps);

    for (const body of [
      { model: "embed", input: ["a", "b"] },
      { model: "embed", input: [] },
    ]) {
      expectValid("PostApiEmbed", await (await postJson(`${server.url}/api/embed`, body)).json());
    }
    for (const body of [{ model: "embed", prompt: "a" }, { model: "embed" }]) {
      expectValid("PostApiEmbeddings", await (await postJson(`${server.url}/api/embeddings`, body)).json());
    }

    // A pull's progress lines (byte counts included) ending with success; one that fails ends with an error line.
    const pulled = await readLines(await postJson(`${server.url}/api/pull`, { model: "hf.co/test/Tiny-GGUF:Q4_K_M" }));
    expect(pulled.at(-1)).toEqual({ status: "success" });
    expect(pulled.some((line) => typeof line.digest === "string" && typeof line.completed === "number")).toBe(true);
    for (const line of pulled) expectValid("PostApiPullEvent", line);
    const failed = await readLines(await postJson(`${server.url}/api/pull`, { model: "hf.co/test/Corrupt-GGUF:Q8_0" }));
    expect(failed.at(-1)?.error).toEqual(expect.any(String));
    for (const line of failed) expectValid("PostApiPullEvent", line);
    expectValid(
      "PostApiPull",
      await (await postJson(`${server.url}/api/pull`, { model: "hf.co/test/Tiny-GGUF:Q4_K_M", stream: false })).json(),
    );

    expectValid("GetPlaygroundApiSession", await (await fetch(`${server.url}/playground/api/session`)).json());
  });

  it("rejects a wrong shape: the check is not vacuous", () => {
    const schema = document.components.schemas.PostV1ChatCompletions!;
    expect(ajv.validate(schema, { id: "x", object: "chat.completion", created: 1, model: "tiny", choices: [{ index: 0 }] })).toBe(false);
  });
});

// The usage and playground replies recorded here are the gate's and the sign-in's: a fake engine serves the chat.
describe("GET /openapi.json, hosted profile", () => {
  let hosted: Hosted;
  let server: TestServer;
  let token: string;
  let document: OpenApiDocument;
  const { expectValid } = validatorOf(() => document);
  const account = { account: "ada", password: "correct horse battery" };

  beforeAll(async () => {
    // Both limits, so the usage reply has a figure of each.
    hosted = await openHosted({ tiers: { default: "free", tiers: { free: { requestsPerMinute: 1000, tokensPerDay: 1_000_000 } } } });
    token = (await hosted.newAccount(undefined, { name: account.account, password: account.password })).token;
    server = await hosted.serve({ engine: new FakeEngine({ models: ["tiny"] }) });
    const response = await fetch(`${server.url}/openapi.json`, { headers: { authorization: `Bearer ${token}` } });
    expect(response.status).toBe(200);
    document = (await response.json()) as OpenApiDocument;
  });
  afterAll(async () => {
    await hosted?.close();
  });

  it("validates recorded responses: a token's usage", async () => {
    const bearer = { authorization: `Bearer ${token}` };
    expect(
      (await postJson(`${server.url}/v1/chat/completions`, { model: "tiny", messages, max_tokens: 2 }, { headers: bearer })).status,
    ).toBe(200);
    // The ledger is written behind the request: a row of usage shows once it is.
    const usage = async () =>
      (await (await fetch(`${server.url}/v1/usage`, { headers: bearer })).json()) as { data: unknown[]; limits: object };
    await expect.poll(async () => (await usage()).data.length).toBeGreaterThan(0);
    const body = await usage();
    expect(Object.keys(body.limits).sort()).toEqual(["requests_per_minute", "tokens_per_day"]);
    expectValid("GetV1Usage", body);
  });

  it("validates recorded responses: the playground's session, sign-in, tokens and usage, with their statuses", async () => {
    // A browser: the cookies the server sets go back with each request, and the CSRF token it was last given.
    const cookies = new Map<string, string>();
    let csrf = "";
    const call = async (method: string, url: string, body?: unknown) => {
      const headers: Record<string, string> = { cookie: [...cookies].map(([name, value]) => `${name}=${value}`).join("; ") };
      if (method !== "GET") headers["x-csrf-token"] = csrf;
      if (body !== undefined) headers["content-type"] = "application/json";
      const response = await fetch(`${server.url}${url}`, {
        method,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      for (const line of response.headers.getSetCookie()) {
        const [name = "", value = ""] = (line.split(";")[0] ?? "").split("=");
        if (value === "") cookies.delete(name);
        else cookies.set(name, value);
      }
      return response;
    };
    const json = async (response: Response, status = 200) => {
      expect(response.status).toBe(status);
      return (await response.json()) as Record<string, unknown>;
    };

    const signedOut = await json(await call("GET", "/playground/api/session"));
    expect(signedOut.signed_in).toBe(false);
    expectValid("GetPlaygroundApiSession", signedOut);
    csrf = String(signedOut.csrf_token);
    const signedIn = await json(await call("POST", "/playground/api/sign-in", account));
    expectValid("PostPlaygroundApiSignIn", signedIn);
    csrf = String(signedIn.csrf_token);
    const session = await json(await call("GET", "/playground/api/session"));
    expect(session.signed_in).toBe(true);
    expectValid("GetPlaygroundApiSession", session);

    const created = await json(await call("POST", "/playground/api/tokens", { name: "new", expires_at: null }), 201);
    expectValid("PostPlaygroundApiTokens", created);
    const listed = (await json(await call("GET", "/playground/api/tokens"))) as { data: unknown[] };
    expect(listed.data.length).toBe(2);
    expectValid("GetPlaygroundApiTokens", listed);
    expectValid("DeletePlaygroundApiTokensId", await json(await call("DELETE", `/playground/api/tokens/${String(created.id)}`)));
    expectValid("GetPlaygroundApiUsage", await json(await call("GET", "/playground/api/usage")));
    expect((await call("POST", "/playground/api/sign-out")).status).toBe(204);

    // The description says so: a new token is a 201, signing out a 204 with no body.
    expect(Object.keys(document.paths["/playground/api/tokens"]?.post?.responses ?? {})).toEqual(["201", "default"]);
    expect(document.paths["/playground/api/sign-out"]?.post?.responses["204"]).toEqual({ description: expect.any(String) });
  });
});

describe("route registration", () => {
  it("refuses a route that does not describe itself", async () => {
    const app = Fastify();
    new ApiDescription({ title: "t", version: "0" }).install(app);
    app.get("/described", { config: { access: "public", openapi: { summary: "ok" } } }, async () => "ok");
    expect(() => app.get("/undescribed", { config: { access: "public" } }, async () => "no")).toThrow(
      /GET \/undescribed has no config.openapi/,
    );
    await app.close();
  });
});
