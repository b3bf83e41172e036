// Issue 29: the JSON Schemas zod 4 writes (z.toJSONSchema) are accepted in every place a schema
// goes (response_format, tool parameters, Ollama's format, Anthropic's input_schema), and what the
// model writes under them parses with zod itself.
import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";
import { zodPerson, zodPersonJsonSchema } from "../support/zodPerson.js";

const messages = [{ role: "user" as const, content: "Describe a person as JSON." }];
const SEEDS = Array.from({ length: 50 }, (_, index) => index + 1);
/** The longest value of zodPerson is about 400 characters; the tiny model writes most of them as one token each. */
const MAX_TOKENS = 600;

/** Schemas zod 4 writes that modelhost used to refuse (numeric ranges, or a pattern beside a format). */
const PREVIOUSLY_REFUSED = {
  int: z.int(),
  positive: z.int().positive(),
  nonnegative: z.number().int().nonnegative(),
  int32: z.int32(),
  range: z.int().min(-5).max(5),
  email: z.email(),
  uuid: z.uuid(),
  guid: z.guid(),
  datetime: z.iso.datetime(),
  datetimeOffset: z.iso.datetime({ offset: true }),
  date: z.iso.date(),
  emailMax: z.email().max(40),
  regex: z.string().regex(/^[a-z]{2,4}-\d+$/),
};

describe("zod 4 schemas", () => {
  let server: TestServer;

  beforeAll(async () => {
    // A tool's schema goes into the prompt too: zod's patterns make it about 2,000 tokens of the tiny model.
    server = await startTestServer({
      models: { tiny: await testModelPath("tiny") },
      manifest: { models: [{ file: "tiny.gguf", id: "tiny" }] },
      config: { contextSize: 4096 },
    });
  });
  afterAll(() => server?.close());

  it("response_format json_schema (strict), 50 seeds at temperature 1: every reply parses with zod", async () => {
    const replies = await Promise.all(
      SEEDS.map((seed) =>
        server.client.chat.completions.create({
          model: "tiny",
          messages,
          response_format: { type: "json_schema", json_schema: { name: "person", schema: zodPersonJsonSchema, strict: true } },
          temperature: 1,
          seed,
          max_tokens: MAX_TOKENS,
        }),
      ),
    );
    const ages = new Set<number>();
    for (const [index, reply] of replies.entries()) {
      const choice = reply.choices[0];
      expect(choice?.finish_reason, `seed ${SEEDS[index]}: ${choice?.message.content}`).toBe("stop");
      const person = zodPerson.parse(JSON.parse(choice?.message.content ?? ""));
      ages.add(person.age);
    }
    expect(ages.size).toBeGreaterThan(1);
  });

  it("each schema zod writes that was refused before is accepted, and its values parse with zod", async () => {
    for (const [name, schema] of Object.entries(PREVIOUSLY_REFUSED)) {
      const wrapped = z.object({ value: schema });
      const reply = await server.client.chat.completions.create({
        model: "tiny",
        messages,
        response_format: {
          type: "json_schema",
          json_schema: { name, schema: z.toJSONSchema(wrapped) as Record<string, unknown>, strict: true },
        },
        temperature: 1,
        seed: 3,
        max_tokens: MAX_TOKENS,
      });
      const text = reply.choices[0]?.message.content ?? "";
      expect(reply.choices[0]?.finish_reason, `${name}: ${text}`).toBe("stop");
      expect(wrapped.safeParse(JSON.parse(text)).error, `${name}: ${text}`).toBeUndefined();
    }
  });

  it("as a tool's parameters, the call's arguments parse with zod", async () => {
    const reply = await server.client.chat.completions.create({
      model: "tiny",
      messages,
      tools: [{ type: "function", function: { name: "save_person", parameters: zodPersonJsonSchema, strict: true } }],
      tool_choice: { type: "function", function: { name: "save_person" } },
      temperature: 1,
      seed: 5,
      max_tokens: MAX_TOKENS,
    });
    const call = reply.choices[0]?.message.tool_calls?.[0];
    expect(call?.type === "function" && call.function.name).toBe("save_person");
    if (call?.type === "function") zodPerson.parse(JSON.parse(call.function.arguments));
  });

  it("as Ollama's format, the reply parses with zod", async () => {
    const ollama = new Ollama({ host: server.url });
    const reply = await ollama.chat({
      model: "tiny",
      messages,
      format: zodPersonJsonSchema,
      options: { temperature: 1, seed: 7, num_predict: MAX_TOKENS },
    });
    zodPerson.parse(JSON.parse(reply.message.content));
  });

  it("as Anthropic's input_schema, the tool_use input parses with zod", async () => {
    const client = new Anthropic({ baseURL: server.url, apiKey: "any-value-works-locally", maxRetries: 0 });
    const reply = await client.messages.create({
      model: "tiny",
      messages,
      max_tokens: MAX_TOKENS,
      tools: [{ name: "save_person", input_schema: zodPersonJsonSchema as Anthropic.Tool.InputSchema }],
      tool_choice: { type: "tool", name: "save_person" },
    });
    const use = reply.content.find((block): block is Anthropic.ToolUseBlock => block.type === "tool_use");
    expect(use?.name).toBe("save_person");
    zodPerson.parse(use?.input);
  });
});
