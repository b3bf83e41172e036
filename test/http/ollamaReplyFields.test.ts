// Issue 29: every field the native API documents for a reply is in it, streamed (the final
// NDJSON line) and not, for /api/chat, /api/generate, /api/embed and /api/embeddings; strict
// clients (ollama-ai-provider-v2) validate them as always there. `load_duration` is sent when the
// model was loaded already too (as 0), where it once was left out.
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

const nanoseconds = z.int().min(0);
const metrics = {
  total_duration: nanoseconds.min(1),
  load_duration: nanoseconds,
  prompt_eval_count: z.int().min(1),
  // Sent only when the prompt cache served part of the prompt (omitempty, as Ollama).
  prompt_eval_cached_count: z.int().min(1).optional(),
  prompt_eval_duration: nanoseconds,
  eval_count: z.int().min(0),
  eval_duration: nanoseconds,
};
const timestamp = z.iso.datetime();
const doneReason = z.enum(["stop", "length"]);
const message = z.strictObject({ role: z.literal("assistant"), content: z.string() });

/** The documented fields, each required; nothing else (strict objects). */
const finalChat = z.strictObject({
  model: z.string(),
  created_at: timestamp,
  message,
  done: z.literal(true),
  done_reason: doneReason,
  ...metrics,
});
const chatChunk = z.strictObject({ model: z.string(), created_at: timestamp, message, done: z.literal(false) });
const finalGenerate = z.strictObject({
  model: z.string(),
  created_at: timestamp,
  response: z.string(),
  done: z.literal(true),
  done_reason: doneReason,
  context: z.array(z.int()),
  ...metrics,
});
const finalRawGenerate = finalGenerate.omit({ context: true });
const generateChunk = z.strictObject({ model: z.string(), created_at: timestamp, response: z.string(), done: z.literal(false) });
const embed = z.strictObject({
  model: z.string(),
  embeddings: z.array(z.array(z.number())),
  total_duration: nanoseconds.min(1),
  load_duration: nanoseconds,
  prompt_eval_count: z.int().min(0),
});
const legacyEmbeddings = z.strictObject({ embedding: z.array(z.number()) });

function expectShape(schema: z.ZodType, value: unknown, what: string): void {
  const parsed = schema.safeParse(value);
  expect(parsed.success ? [] : [what, parsed.error.issues, value]).toEqual([]);
}

async function ndjson(response: Response): Promise<unknown[]> {
  expect(response.status).toBe(200);
  return (await response.text())
    .trimEnd()
    .split("\n")
    .map((line) => JSON.parse(line) as unknown);
}

describe("native replies carry every documented field", () => {
  let server: TestServer;
  const post = (path: string, body: object) => postJson(`${server.url}${path}`, body);

  beforeAll(async () => {
    server = await startTestServer({
      models: { tiny: await testModelPath("tiny"), "embed-tiny": await testModelPath("embed-tiny") },
      config: { contextSize: 2048 },
    });
  });
  afterAll(() => server?.close());

  it("/api/embed, when it loads the model and when the model is loaded already; /api/embeddings", async () => {
    const first = (await (await post("/api/embed", { model: "embed-tiny", input: ["one", "two"] })).json()) as { load_duration: number };
    expectShape(embed, first, "embed, loading");
    expect(first.load_duration).toBeGreaterThan(0);
    const loaded = (await (await post("/api/embed", { model: "embed-tiny", input: "three" })).json()) as { load_duration: number };
    expectShape(embed, loaded, "embed, loaded");
    expect(loaded.load_duration).toBe(0);
    expectShape(embed, await (await post("/api/embed", { model: "embed-tiny", input: [] })).json(), "embed, no input");
    expectShape(legacyEmbeddings, await (await post("/api/embeddings", { model: "embed-tiny", prompt: "four" })).json(), "embeddings");
  });

  it("/api/chat, streamed (each chunk, and the final line) and not, loading the model and with it loaded", async () => {
    const body = { model: "tiny", messages: [{ role: "user", content: "Hello." }], options: { num_predict: 4 } };
    for (const round of ["loading", "loaded"]) {
      expectShape(finalChat, await (await post("/api/chat", { ...body, stream: false })).json(), `chat ${round}, not streamed`);
      const lines = await ndjson(await post("/api/chat", body));
      for (const line of lines.slice(0, -1)) expectShape(chatChunk, line, `chat ${round}, chunk`);
      expectShape(finalChat, lines.at(-1), `chat ${round}, final line`);
    }
  });

  it("/api/generate, templated (with context) and raw (without), streamed and not", async () => {
    for (const [raw, schema] of [
      [false, finalGenerate],
      [true, finalRawGenerate],
    ] as const) {
      const body = { model: "tiny", prompt: "Once upon a time", raw, options: { num_predict: 4 } };
      expectShape(schema, await (await post("/api/generate", { ...body, stream: false })).json(), `generate raw=${raw}, not streamed`);
      const lines = await ndjson(await post("/api/generate", body));
      for (const line of lines.slice(0, -1)) expectShape(generateChunk, line, `generate raw=${raw}, chunk`);
      expectShape(schema, lines.at(-1), `generate raw=${raw}, final line`);
    }
  });
});
