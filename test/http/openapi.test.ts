// Issue 16, OpenAPI: GET /openapi.json is generated from the zod schemas the routes validate
// with; every registered route is in it (a route cannot be registered without its description);
// responses recorded here from the real server validate against it.
import { Ajv2020 } from "ajv/dist/2020.js";
import Fastify from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { ApiDescription, openApiPath } from "../../src/http/openapi.js";
import { chatCompletionRequestSchema } from "../../src/protocols/openai/schemas.js";
import { routesOf } from "../support/routeTree.js";
import { postJson, readNamedEvents, readSseEvents, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, { summary: string; requestBody?: { content: { "application/json": { schema: unknown } } } }>>;
  components: { schemas: Record<string, object> };
}

/** The methods an OpenAPI path item has; a catch-all route's others (PROPFIND…) cannot be described. */
const DESCRIBABLE = new Set(["GET", "PUT", "POST", "DELETE", "OPTIONS", "PATCH", "TRACE"]);

const messages = [{ role: "user" as const, content: "Hello there." }];

describe("GET /openapi.json", () => {
  let server: TestServer;
  let document: OpenApiDocument;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  /** Checks a recorded body against a component of the description. */
  const expectValid = (component: string, body: unknown) => {
    const schema = document.components.schemas[component];
    expect(schema, `component ${component}`).toBeDefined();
    const validate = ajv.compile(schema!);
    const valid = validate(body);
    expect(valid ? [] : validate.errors, `${component}: ${JSON.stringify(body).slice(0, 300)}`).toEqual([]);
  };

  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny"), embed: await testModelPath("embed-tiny"), rerank: await testModelPath("rerank-tiny") } });
    const response = await fetch(`${server.url}/openapi.json`);
    expect(response.status).toBe(200);
    document = (await response.json()) as OpenApiDocument;
  });
  afterAll(async () => server?.close());

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

    const streamed = await postJson(`${server.url}/v1/chat/completions`, { model: "tiny", messages, max_tokens: 4, stream: true, stream_options: { include_usage: true } });
    const events = await readSseEvents(streamed);
    expect(events.at(-1)).toBe("[DONE]");
    for (const event of events.slice(0, -1)) expectValid("PostV1ChatCompletionsEvent", JSON.parse(event));

    expectValid("GetV1Models", await (await fetch(`${server.url}/v1/models`)).json());
    expectValid("GetV1Models", await (await fetch(`${server.url}/playground/api/models`)).json());
    expectValid("GetV1ModelsPath", await (await fetch(`${server.url}/v1/models/tiny`)).json());
    expectValid("PostV1Embeddings", await (await postJson(`${server.url}/v1/embeddings`, { model: "embed", input: ["a", "b"] })).json());
    expectValid("PostV1Embeddings", await (await postJson(`${server.url}/v1/embeddings`, { model: "embed", input: "a", encoding_format: "base64" })).json());

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
    expectValid("PostApiChat", await (await postJson(`${server.url}/api/chat`, { model: "tiny", messages, stream: false, options: { num_predict: 4 } })).json());
    const lines = (await (await postJson(`${server.url}/api/generate`, { model: "tiny", prompt: "Hi", options: { num_predict: 4 } })).text()).trim().split("\n");
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
    expect(named.map((event) => event.event)).toEqual(expect.arrayContaining(["message_start", "ping", "content_block_delta", "message_delta", "message_stop"]));
    for (const { data } of named) expectValid("PostV1MessagesEvent", data);
    const anthropicError = await postJson(`${server.url}/v1/messages`, { ...anthropic, model: "nope" });
    expect(anthropicError.status).toBe(404);
    expectValid("AnthropicError", await anthropicError.json());

    const legacy = { model: "tiny", prompt: "Once upon", max_tokens: 4 };
    expectValid("PostV1Completions", await (await postJson(`${server.url}/v1/completions`, { ...legacy, logprobs: 2, echo: true })).json());
    const chunks = await readSseEvents(await postJson(`${server.url}/v1/completions`, { ...legacy, stream: true, logprobs: 1, stream_options: { include_usage: true } }));
    expect(chunks.at(-1)).toBe("[DONE]");
    for (const chunk of chunks.slice(0, -1)) expectValid("PostV1CompletionsEvent", JSON.parse(chunk));

    const created = (await (await postJson(`${server.url}/v1/responses`, { model: "tiny", input: "Hi", max_output_tokens: 4, include: ["message.output_text.logprobs"], top_logprobs: 2 })).json()) as { id: string };
    expectValid("PostV1Responses", created);
    const typed = await readNamedEvents(await postJson(`${server.url}/v1/responses`, { model: "tiny", input: "Hi", max_output_tokens: 4, stream: true, store: false }));
    expect(typed.map((event) => event.event)).toEqual(expect.arrayContaining(["response.created", "response.output_text.delta", "response.incomplete"]));
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
      const pieces = (await (await postJson(`${server.url}${path}`, { model: "tiny", content: "a 🎉", with_pieces: true })).json()) as { tokens: { piece: unknown }[] };
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

  it("rejects a wrong shape: the check is not vacuous", () => {
    const schema = document.components.schemas.PostV1ChatCompletions!;
    expect(ajv.validate(schema, { id: "x", object: "chat.completion", created: 1, model: "tiny", choices: [{ index: 0 }] })).toBe(false);
  });
});

describe("route registration", () => {
  it("refuses a route that does not describe itself", async () => {
    const app = Fastify();
    new ApiDescription({ title: "t", version: "0" }).install(app);
    app.get("/described", { config: { access: "public", openapi: { summary: "ok" } } }, async () => "ok");
    expect(() => app.get("/undescribed", { config: { access: "public" } }, async () => "no")).toThrow(/GET \/undescribed has no config.openapi/);
    await app.close();
  });
});
