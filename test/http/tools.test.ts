import { Ajv } from "ajv";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";
import { byteSymbol, testVocabulary } from "../../src/testmodels/testVocabulary.js";

// The test model has random weights: whatever it "wants", grammar-constrained decoding must make
// every call well formed and valid against its function's schema. Strings are bounded so that
// random text ends.
const weather = {
  type: "object",
  properties: {
    city: { type: "string", maxLength: 12 },
    unit: { type: "string", enum: ["celsius", "fahrenheit"] },
    days: { type: "integer" },
  },
  required: ["city", "unit"],
  additionalProperties: false,
} as const;
const add = {
  type: "object",
  properties: { a: { type: "number" }, b: { type: "number" }, note: { type: ["string", "null"], maxLength: 8 } },
  required: ["a", "b"],
} as const;

const tools: OpenAI.ChatCompletionTool[] = [
  { type: "function", function: { name: "get_weather", description: "Current weather in a city", parameters: weather } },
  { type: "function", function: { name: "add", description: "Add two numbers", parameters: add } },
];
const schemas: Record<string, object> = { get_weather: weather, add };
const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "What is the weather in Paris, and what is 2+3?" }];

const ajv = new Ajv({ strict: false });

function expectValidCalls(calls: OpenAI.ChatCompletionMessageToolCall[] | undefined): void {
  expect(calls?.length).toBeGreaterThan(0);
  for (const call of calls ?? []) {
    if (call.type !== "function") throw new Error("expected a function call");
    expect(call.id).toMatch(/^call_[A-Za-z0-9]{24}$/);
    const schema = schemas[call.function.name];
    expect(schema, `a known function, got ${call.function.name}`).toBeDefined();
    const args: unknown = JSON.parse(call.function.arguments);
    expect(ajv.validate(schema!, args), `${call.function.arguments}: ${ajv.errorsText()}`).toBe(true);
  }
}

/** Accumulates streamed tool-call fragments per index, as SDKs do. */
async function accumulate(stream: AsyncIterable<OpenAI.ChatCompletionChunk>) {
  const calls: Array<{ id: string; name: string; arguments: string }> = [];
  let content = "";
  let finishReason: string | null = null;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    content += choice.delta.content ?? "";
    finishReason = choice.finish_reason ?? finishReason;
    for (const fragment of choice.delta.tool_calls ?? []) {
      const call = (calls[fragment.index] ??= { id: "", name: "", arguments: "" });
      if (fragment.id) call.id = fragment.id;
      call.name += fragment.function?.name ?? "";
      call.arguments += fragment.function?.arguments ?? "";
    }
  }
  return { calls, content, finishReason };
}

describe("tool calls", () => {
  let server: TestServer;
  let client: OpenAI;

  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { contextSize: 2048 } });
    client = server.client;
  });
  afterAll(() => server?.close());

  it('"required" always produces valid calls, with finish_reason tool_calls and null content', async () => {
    for (const seed of [1, 2, 3]) {
      const reply = await client.chat.completions.create({
        model: "tiny",
        messages,
        tools,
        tool_choice: "required",
        parallel_tool_calls: false,
        temperature: 1,
        seed,
        max_tokens: 400,
      });
      const [choice] = reply.choices;
      expect(choice?.finish_reason).toBe("tool_calls");
      expect(choice?.message.content).toBeNull();
      expect(choice?.message.tool_calls).toHaveLength(1);
      expectValidCalls(choice?.message.tool_calls);
    }
  });

  it("a named function is the one called, exactly once", async () => {
    const reply = await client.chat.completions.create({
      model: "tiny",
      messages,
      tools,
      tool_choice: { type: "function", function: { name: "add" } },
      temperature: 0,
      max_tokens: 400,
    });
    const calls = reply.choices[0]?.message.tool_calls;
    expect(calls).toHaveLength(1);
    expect(calls?.[0]?.type === "function" && calls[0].function.name).toBe("add");
    expectValidCalls(calls);
    expect(reply.choices[0]?.finish_reason).toBe("tool_calls");
  });

  it('"none" produces no call', async () => {
    const reply = await client.chat.completions.create({ model: "tiny", messages, tools, tool_choice: "none", max_tokens: 20 });
    expect(reply.choices[0]?.message.tool_calls).toBeUndefined();
    expect(typeof reply.choices[0]?.message.content).toBe("string");
    expect(reply.choices[0]?.finish_reason).not.toBe("tool_calls");
  });

  it('"auto" lets the model decide: text or valid calls', async () => {
    const reply = await client.chat.completions.create({ model: "tiny", messages, tools, temperature: 0, max_tokens: 40 });
    const choice = reply.choices[0];
    if (choice?.message.tool_calls) expectValidCalls(choice.message.tool_calls);
    else expect(typeof choice?.message.content).toBe("string");
  });

  it("parallel calls, when allowed, are each valid", async () => {
    const reply = await client.chat.completions.create({
      model: "tiny",
      messages,
      tools,
      tool_choice: "required",
      temperature: 0.7,
      seed: 5,
      max_tokens: 600,
    });
    const choice = reply.choices[0];
    if (choice?.finish_reason === "tool_calls") expectValidCalls(choice.message.tool_calls);
    else expect(choice?.finish_reason).toBe("length");
  });

  it("streams call fragments that accumulate to the unstreamed reply", async () => {
    const request = {
      model: "tiny",
      messages,
      tools,
      tool_choice: "required" as const,
      parallel_tool_calls: false,
      temperature: 0,
      max_tokens: 400,
    };
    const plain = await client.chat.completions.create(request);
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) chunks.push(chunk);
    const streamed = await accumulate(chunks as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>);
    const plainCalls = (plain.choices[0]?.message.tool_calls ?? []).map((call) =>
      call.type === "function" ? { name: call.function.name, arguments: call.function.arguments } : {},
    );
    expect(streamed.calls.map(({ name, arguments: args }) => ({ name, arguments: args }))).toEqual(plainCalls);
    expect(streamed.calls[0]?.id).toMatch(/^call_/);
    expect(streamed.finishReason).toBe("tool_calls");
    expect(streamed.content).toBe("");
    // The first fragment of a call carries id, type and name with empty arguments; later ones only arguments.
    const fragments = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []);
    expect(fragments[0]).toMatchObject({ index: 0, type: "function", function: { arguments: "" } });
    expect(fragments[0]?.id).toBeDefined();
    expect(fragments.slice(1).every((fragment) => fragment.id === undefined && fragment.function?.name === undefined)).toBe(true);
  });

  it("opens a streamed call with the role in its first chunk and no content, as OpenAI does", async () => {
    for (const tool_choice of ["required", { type: "function", function: { name: "get_weather" } }] as const) {
      const chunks: OpenAI.ChatCompletionChunk[] = [];
      const stream = await client.chat.completions.create({
        model: "tiny",
        messages,
        tools,
        tool_choice,
        parallel_tool_calls: false,
        temperature: 0,
        max_tokens: 400,
        stream: true,
      });
      for await (const chunk of stream) chunks.push(chunk);
      const first = chunks[0]?.choices[0]?.delta;
      expect(first).toMatchObject({ role: "assistant", tool_calls: [{ index: 0, type: "function", function: { arguments: "" } }] });
      expect(first?.tool_calls?.[0]?.id).toMatch(/^call_/);
      // An empty content would make clients that start a text part on any string (the AI SDK) start an empty one.
      expect(chunks.filter((chunk) => chunk.choices[0] !== undefined && "content" in chunk.choices[0].delta)).toEqual([]);
      expect(chunks.filter((chunk) => chunk.choices[0]?.delta.role !== undefined)).toHaveLength(1);
    }
  });

  it("runs a two-round tool loop with results fed back", async () => {
    const first = await client.chat.completions.create({
      model: "tiny",
      messages,
      tools,
      tool_choice: "required",
      parallel_tool_calls: false,
      temperature: 0,
      max_tokens: 400,
    });
    const assistant = first.choices[0]!.message;
    const history: OpenAI.ChatCompletionMessageParam[] = [
      ...messages,
      { role: "assistant", content: assistant.content, tool_calls: assistant.tool_calls },
      ...(assistant.tool_calls ?? []).map((call) => ({
        role: "tool" as const,
        tool_call_id: call.id,
        content: JSON.stringify({ result: 21 }),
      })),
    ];
    const second = await client.chat.completions.create({ model: "tiny", messages: history, tools, max_tokens: 12 });
    expect(second.choices[0]?.finish_reason).toMatch(/^(stop|length|tool_calls)$/);
    expect(second.usage!.prompt_tokens).toBeGreaterThan(first.usage!.prompt_tokens);
  });

  it("json_object output parses as a JSON object, streamed or not", async () => {
    const request = {
      model: "tiny",
      messages: [{ role: "user" as const, content: "Describe Paris as JSON." }],
      response_format: { type: "json_object" as const },
      temperature: 0.9,
      seed: 3,
      max_tokens: 300,
    };
    const reply = await client.chat.completions.create(request);
    if (reply.choices[0]?.finish_reason === "stop") {
      const value: unknown = JSON.parse(reply.choices[0].message.content ?? "");
      expect(typeof value === "object" && value !== null && !Array.isArray(value)).toBe(true);
    } else {
      expect(reply.choices[0]?.message.content?.startsWith("{")).toBe(true);
    }
  });

  it("json_schema output validates against the schema", async () => {
    const schema = {
      type: "object",
      properties: {
        name: { type: "string", maxLength: 10 },
        tags: { type: "array", items: { type: "string", enum: ["a", "b"] }, maxItems: 3 },
        ok: { type: "boolean" },
      },
      required: ["name", "tags", "ok"],
      additionalProperties: false,
    };
    for (const stream of [false, true]) {
      const request = {
        model: "tiny",
        messages: [{ role: "user" as const, content: "Fill the form." }],
        response_format: { type: "json_schema" as const, json_schema: { name: "form", schema, strict: true } },
        temperature: 0.8,
        seed: 11,
        max_tokens: 300,
      };
      let text = "";
      if (stream) {
        for await (const chunk of await client.chat.completions.create({ ...request, stream: true }))
          text += chunk.choices[0]?.delta.content ?? "";
      } else {
        text = (await client.chat.completions.create(request)).choices[0]?.message.content ?? "";
      }
      expect(ajv.validate(schema, JSON.parse(text)), `${text}: ${ajv.errorsText()}`).toBe(true);
    }
  });

  it("json_schema output stays valid UTF-8 where llama.cpp's grammar alone lets byte tokens write overlong forms", async () => {
    // llama.cpp's grammar takes E0 followed by 80–9F and one more continuation byte for a character
    // (an overlong form; src/engine/Utf8Guard.ts). Biased toward exactly those byte tokens, the tiny
    // model wrote them into the name: U+FFFD three times a character as text, past maxLength.
    const vocabulary = testVocabulary();
    const idOf = (byte: number) => vocabulary.tokens.indexOf(byteSymbol(byte));
    const logit_bias = Object.fromEntries(
      [0xe0, ...Array.from({ length: 0x20 }, (_, i) => 0x80 + i)].map((byte) => [String(idOf(byte)), 30]),
    );
    const schema = {
      type: "object",
      properties: { name: { type: "string", maxLength: 10 }, ok: { type: "boolean" } },
      required: ["name", "ok"],
      additionalProperties: false,
    };
    const request = {
      model: "tiny",
      messages: [{ role: "user" as const, content: "Fill the form." }],
      response_format: { type: "json_schema" as const, json_schema: { name: "form", schema, strict: true } },
      temperature: 0,
      logit_bias,
      max_tokens: 400,
    };
    for (const stream of [false, true]) {
      let text = "";
      if (stream) {
        for await (const chunk of await client.chat.completions.create({ ...request, stream: true }))
          text += chunk.choices[0]?.delta.content ?? "";
      } else {
        text = (await client.chat.completions.create(request)).choices[0]?.message.content ?? "";
      }
      expect(text).not.toContain("\uFFFD");
      const value = JSON.parse(text) as { name: string };
      expect(ajv.validate(schema, value), `${text}: ${ajv.errorsText()}`).toBe(true);
      // The bias did steer the name to characters led by E0 (U+0800–U+0FFF), now well formed.
      expect(
        [...value.name].some((character) => character.codePointAt(0)! >= 0x800 && character.codePointAt(0)! <= 0xfff),
        text,
      ).toBe(true);
    }
  });

  it.each([
    [{ tools: "nope" }, "tools"],
    [{ tools: [{ type: "function", function: { name: "bad name!" } }] }, "tools[0].function.name"],
    [{ tools: [{ type: "function", function: { name: "x".repeat(65) } }] }, "tools[0].function.name"],
    [{ tools: [{ type: "retrieval" }] }, "tools[0].type"],
    [{ tools: [tools[0], tools[0]] }, "tools[1].function.name"],
    [{ tools: [{ type: "function", function: { name: "f", parameters: { type: "string" } } }] }, "tools[0].function.parameters.type"],
    [
      {
        tools: [
          {
            type: "function",
            function: { name: "f", parameters: { type: "object", properties: { zip: { type: "string", pattern: "^(?!0)[0-9]{5}$" } } } },
          },
        ],
      },
      "tools[0].function.parameters.properties.zip.pattern",
    ],
    [{ tools, tool_choice: "sometimes" }, "tool_choice"],
    [{ tools, tool_choice: { type: "function", function: { name: "missing" } } }, "tool_choice.function.name"],
    [{ tool_choice: "required" }, "tool_choice"],
    [{ tools, parallel_tool_calls: "yes" }, "parallel_tool_calls"],
    [{ response_format: { type: "yaml" } }, "response_format.type"],
    [{ response_format: { type: "json_schema", json_schema: { name: "has space", schema: {} } } }, "response_format.json_schema.name"],
    [
      {
        response_format: {
          type: "json_schema",
          json_schema: { name: "s", schema: { type: "object", properties: { n: { type: "number", minimum: 3 } } } },
        },
      },
      "response_format.json_schema.schema.properties.n.minimum",
    ],
    [
      {
        messages: [
          ...messages,
          { role: "assistant", content: null, tool_calls: [{ type: "function", function: { name: "add", arguments: "{}" } }] },
        ],
      },
      "messages[1].tool_calls[0].id",
    ],
  ])("refuses %j with a 400 naming %s", async (overrides, param) => {
    const response = await postJson(`${server.url}/v1/chat/completions`, { model: "tiny", messages, ...overrides });
    expect(response.status).toBe(400);
    const body = (await response.json()) as { error: { param: string; type: string; message: string } };
    expect(body.error.type).toBe("invalid_request_error");
    expect(body.error.param).toBe(param);
  });
});

describe("auto tool choice when the model opens a call by itself", () => {
  let server: TestServer;
  let toolCallToken: number;

  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { contextSize: 2048 } });
    // The random test model never writes `<tool_call>` on its own; logit_bias makes it start there,
    // as a trained model would, so the auto path (detect the opener, rewind, constrain) is exercised.
    toolCallToken = testVocabulary().tokens.indexOf("<tool_call>");
    expect(toolCallToken).toBeGreaterThan(0);
  });
  afterAll(() => server?.close());

  it("detects the opener in free text, then completes a valid call under the grammar", async () => {
    const request = {
      model: "tiny",
      messages,
      tools,
      tool_choice: "auto" as const,
      parallel_tool_calls: false,
      temperature: 0,
      max_tokens: 400,
      logit_bias: { [toolCallToken]: 100 },
    };
    const reply = await server.client.chat.completions.create(request);
    expect(reply.choices[0]?.finish_reason).toBe("tool_calls");
    expectValidCalls(reply.choices[0]?.message.tool_calls);
    const streamed = await accumulate(await server.client.chat.completions.create({ ...request, stream: true }));
    expect(streamed.calls.map(({ name, arguments: args }) => ({ name, arguments: args }))).toEqual(
      (reply.choices[0]?.message.tool_calls ?? []).map((call) =>
        call.type === "function" ? { name: call.function.name, arguments: call.function.arguments } : {},
      ),
    );
  });

  it("counts the opener once: the model's, replaced by the template's, costs what a required call's does", async () => {
    const request = {
      model: "tiny",
      messages,
      tools,
      parallel_tool_calls: false,
      temperature: 0,
      max_tokens: 400,
      logit_bias: { [toolCallToken]: 100 },
    };
    // Same context after the rewind as a required call's (the prompt and the template's opener), so the same call.
    const auto = await server.client.chat.completions.create({ ...request, tool_choice: "auto" });
    const required = await server.client.chat.completions.create({ ...request, tool_choice: "required" });
    expect(auto.choices[0]?.message.tool_calls).toHaveLength(1);
    expect(auto.choices[0]?.message.tool_calls?.map((call) => call.type === "function" && call.function)).toEqual(
      required.choices[0]?.message.tool_calls?.map((call) => call.type === "function" && call.function),
    );
    expect(auto.usage?.completion_tokens).toBe(required.usage?.completion_tokens);
  });

  it("keeps an opened call within max_tokens, its opener included", async () => {
    for (const maxTokens of [1, 2, 3, 5, 8, 13, 21, 34]) {
      const reply = await server.client.chat.completions.create({
        model: "tiny",
        messages,
        tools,
        tool_choice: "auto",
        temperature: 0,
        max_tokens: maxTokens,
        logit_bias: { [toolCallToken]: 100 },
      });
      expect(reply.usage?.completion_tokens, `max_tokens ${maxTokens}`).toBe(maxTokens);
      expect(reply.choices[0]?.finish_reason).toBe("length");
    }
  });

  it("refuses a logit_bias token id outside the model's vocabulary", async () => {
    const response = await postJson(`${server.url}/v1/chat/completions`, { model: "tiny", messages, logit_bias: { "999999": 5 } });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { param: string } }).error.param).toBe("logit_bias");
  });

  it("bans tokens with -100", async () => {
    const request = { model: "tiny", messages, temperature: 0, max_tokens: 60 };
    const plain = (await server.client.chat.completions.create(request)).choices[0]?.message.content ?? "";
    const letter = [...plain].find((char) => /[a-z]/.test(char));
    expect(letter, `a letter in ${JSON.stringify(plain)}`).toBeDefined();
    // Every token whose text contains the letter: with all of them banned it cannot appear.
    const banned = Object.fromEntries(testVocabulary().tokens.flatMap((token, id) => (token.includes(letter!) ? [[id, -100]] : [])));
    const reply = await server.client.chat.completions.create({ ...request, logit_bias: banned });
    expect(reply.choices[0]?.message.content).not.toContain(letter);
  });
});
