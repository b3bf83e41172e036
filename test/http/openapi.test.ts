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
import { postJson, readSseEvents, startTestServer, type TestServer } from "../support/startTestServer.js";
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
    server = await startTestServer({ models: { tiny: await testModelPath("tiny"), embed: await testModelPath("embed-tiny") } });
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
