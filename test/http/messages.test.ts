import Anthropic from "@anthropic-ai/sdk";
import { Ajv } from "ajv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { wholePrompt } from "../support/anthropicUsage.js";
import { postJson, readNamedEvents, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";
import { weatherSchema as weather } from "../support/toolSchemas.js";

// Anthropic's Messages API, through the official SDK unchanged but for the address, against the
// real server on a generated model (random weights: it writes gibberish, deterministically at
// temperature 0). The SDK's types no longer declare temperature, top_p and top_k; the API takes
// them, so requests carry them through a variable (no excess-property check).

const messages: Anthropic.MessageParam[] = [{ role: "user", content: "What is the weather in Paris?" }];
const greedy = { model: "tiny", messages, max_tokens: 30, temperature: 0 };

const add = { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] } as const;
const tools: Anthropic.Tool[] = [
  { name: "get_weather", description: "Current weather in a city", input_schema: weather as never },
  { name: "add", description: "Add two numbers", input_schema: add as never },
];
const schemas: Record<string, object> = { get_weather: weather, add };
const ajv = new Ajv({ strict: false });

function expectValidToolUses(content: Anthropic.ContentBlock[]): Anthropic.ToolUseBlock[] {
  const uses = content.filter((block): block is Anthropic.ToolUseBlock => block.type === "tool_use");
  expect(uses.length).toBeGreaterThan(0);
  for (const use of uses) {
    expect(use.id).toMatch(/^toolu_[A-Za-z0-9]{24}$/);
    const schema = schemas[use.name];
    expect(schema, `a known tool, got ${use.name}`).toBeDefined();
    expect(ajv.validate(schema!, use.input), `${JSON.stringify(use.input)}: ${ajv.errorsText()}`).toBe(true);
  }
  return uses;
}

function textOf(message: Anthropic.Message): string {
  return message.content.map((block) => (block.type === "text" ? block.text : "")).join("");
}

describe("Messages API (/v1/messages)", () => {
  let server: TestServer;
  let client: Anthropic;

  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { contextSize: 2048 } });
    client = new Anthropic({ baseURL: server.url, apiKey: "any-value-works-locally", maxRetries: 0 });
  });
  afterAll(() => server?.close());

  it("answers messages.create with a message: msg_ id, text block, stop reason and usage", async () => {
    const reply = await client.messages.create({ ...greedy, system: "You are terse." });
    expect(reply).toMatchObject({ type: "message", role: "assistant", model: "tiny", stop_sequence: null });
    expect(reply.id).toMatch(/^msg_[A-Za-z0-9]{24}$/);
    expect(reply.content).toHaveLength(1);
    expect(reply.content[0]).toMatchObject({ type: "text", text: expect.any(String) });
    expect(["end_turn", "max_tokens"]).toContain(reply.stop_reason);
    expect(reply.usage.input_tokens).toBeGreaterThan(0);
    expect(reply.usage.output_tokens).toBeGreaterThan(0);
    expect(reply.usage.output_tokens).toBeLessThanOrEqual(30);
  });

  it("stops at max_tokens with stop_reason max_tokens", async () => {
    const reply = await client.messages.create({ ...greedy, max_tokens: 4 });
    expect(reply.stop_reason).toBe("max_tokens");
    expect(reply.usage.output_tokens).toBe(4);
  });

  it("streams with .stream(): the final message equals the non-streamed one", async () => {
    const plain = await client.messages.create(greedy);
    const stream = client.messages.stream(greedy);
    let deltas = "";
    stream.on("text", (text) => (deltas += text));
    const final = await stream.finalMessage();
    expect(textOf(final)).toBe(textOf(plain));
    expect(deltas).toBe(textOf(plain));
    expect(final.stop_reason).toBe(plain.stop_reason);
    expect(wholePrompt(final.usage)).toBe(wholePrompt(plain.usage));
    expect(final.usage.output_tokens).toBe(plain.usage.output_tokens);
    expect(final.id).toMatch(/^msg_/);
  });

  it("sends the named events in order: message_start, ping, content blocks, message_delta, message_stop", async () => {
    const response = await postJson(`${server.url}/v1/messages`, { ...greedy, max_tokens: 6, stream: true });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events = await readNamedEvents(response);
    const names = events.map((event) => event.event).filter((name) => name !== "ping");
    expect(names[0]).toBe("message_start");
    expect(events[1]?.event).toBe("ping");
    expect(names.slice(1, 2)).toEqual(["content_block_start"]);
    expect(names.slice(-3)).toEqual(["content_block_stop", "message_delta", "message_stop"]);
    expect(new Set(names.slice(2, -3))).toEqual(new Set(["content_block_delta"]));
    const start = events[0]!.data as unknown as Anthropic.RawMessageStartEvent;
    expect(start.message).toMatchObject({ type: "message", role: "assistant", content: [], stop_reason: null });
    const delta = events.find((event) => event.event === "message_delta")!.data as unknown as Anthropic.RawMessageDeltaEvent;
    expect(delta.delta.stop_reason).toBe("max_tokens");
    expect(delta.usage.output_tokens).toBe(6);
    // The prompt's size is known before the first token; at the end it is split into what the cache served and the rest.
    expect(start.message.usage.input_tokens).toBe(wholePrompt(delta.usage));
    for (const event of events.filter((e) => e.event.startsWith("content_block"))) expect(event.data.index).toBe(0);
  });

  it("frees the model's slot when the client aborts a stream (the SDK's stream.abort())", async () => {
    const stream = client.messages.stream({ ...greedy, max_tokens: 1500 });
    const ended = stream.done().then(
      () => undefined,
      (error: unknown) => error,
    );
    await new Promise<void>((resolve) => stream.once("text", () => resolve()));
    stream.abort();
    // Within a bounded time the model reports no request decoding or waiting.
    const busy = async () => {
      const health = (await (await fetch(`${server.url}/health`)).json()) as {
        loaded: Array<{ id: string; active: number; queued: number }>;
      };
      return health.loaded.some((model) => model.id === "tiny" && model.active + model.queued > 0);
    };
    await expect.poll(busy, { timeout: 2000, interval: 20 }).toBe(false);
    expect(await ended).toBeInstanceOf(Anthropic.APIUserAbortError);
  });

  it("counts tokens: count_tokens equals the input_tokens of the same request, with system and tools", async () => {
    const request = { model: "tiny", system: [{ type: "text" as const, text: "Be brief." }], messages, tools };
    const counted = await client.messages.countTokens(request);
    const reply = await client.messages.create({ ...request, max_tokens: 1 });
    expect(counted.input_tokens).toBe(wholePrompt(reply.usage));
    // The tools are part of the prompt.
    const withoutTools = await client.messages.countTokens({ model: "tiny", messages });
    expect(withoutTools.input_tokens).toBeLessThan(counted.input_tokens);
    expect(Object.keys(counted)).toEqual(["input_tokens"]);
  });

  it("reads consecutive turns of one role as one turn, as the API combines them", async () => {
    const split = await client.messages.countTokens({
      model: "tiny",
      messages: [
        { role: "user", content: "Hello." },
        { role: "user", content: "Weather in Paris?" },
      ],
    });
    const merged = await client.messages.countTokens({ model: "tiny", messages: [{ role: "user", content: "Hello.\nWeather in Paris?" }] });
    expect(split.input_tokens).toBe(merged.input_tokens);
    const reply = await client.messages.create({
      ...greedy,
      max_tokens: 3,
      messages: [
        { role: "user", content: "Hello." },
        { role: "user", content: "Weather in Paris?" },
      ],
    });
    expect(wholePrompt(reply.usage)).toBe(merged.input_tokens);
  });

  it("continues a final assistant turn (a prefill): the prompt ends with its text, and the reply holds what follows", async () => {
    const prefill = "The weather in Paris is";
    const prefilled: Anthropic.MessageParam[] = [...messages, { role: "assistant", content: prefill }];
    const withPrefill = await client.messages.countTokens({ model: "tiny", messages: prefilled });
    const without = await client.messages.countTokens({ model: "tiny", messages });
    const { tokens } = (await (await postJson(`${server.url}/tokenize`, { model: "tiny", content: prefill })).json()) as {
      tokens: number[];
    };
    // The turn the model writes in holds the prefill, and nothing closes it or opens another.
    expect(withPrefill.input_tokens).toBe(without.input_tokens + tokens.length);
    const reply = await client.messages.create({ ...greedy, messages: prefilled, max_tokens: 5 });
    expect(wholePrompt(reply.usage)).toBe(withPrefill.input_tokens);
    expect(reply.usage.output_tokens).toBe(5);
    expect(reply.content).toHaveLength(1);
    const final = await client.messages.stream({ ...greedy, messages: prefilled, max_tokens: 5 }).finalMessage();
    expect(textOf(final)).toBe(textOf(reply));
  });

  it("ends at a stop sequence: stop_reason stop_sequence and the sequence named, streamed or not", async () => {
    const full = textOf(await client.messages.create({ ...greedy, max_tokens: 60 }));
    // A piece of the text the model will write anyway, so the stop sequence is certain to occur.
    const stop = full.slice(20, 23);
    expect(stop).toHaveLength(3);
    const expected = full.slice(0, full.indexOf(stop));
    const request = { ...greedy, max_tokens: 60, stop_sequences: ["never-generated-ZZZ", stop] };
    const plain = await client.messages.create(request);
    expect(textOf(plain)).toBe(expected);
    expect(plain.stop_reason).toBe("stop_sequence");
    expect(plain.stop_sequence).toBe(stop);

    const final = await client.messages.stream(request).finalMessage();
    expect(textOf(final)).toBe(expected);
    expect(final.stop_reason).toBe("stop_sequence");
    expect(final.stop_sequence).toBe(stop);
  });

  it("samples with temperature, top_p and top_k, reproducibly only at temperature 0", async () => {
    const sampled = { ...greedy, temperature: 1, top_p: 0.9, top_k: 5 };
    const a = await client.messages.create(sampled);
    expect(a.usage.output_tokens).toBeGreaterThan(0);
    const [g1, g2] = [await client.messages.create(greedy), await client.messages.create(greedy)];
    expect(textOf(g1)).toBe(textOf(g2));
    // top_k 1 is greedy whatever the temperature.
    const topOne = { ...greedy, temperature: 1, top_k: 1 };
    expect(textOf(await client.messages.create(topOne))).toBe(textOf(g1));
  });

  it("accepts metadata, anthropic-version and cache_control, and ignores them", async () => {
    const reply = await client.messages.create({
      ...greedy,
      max_tokens: 3,
      metadata: { user_id: "user-123" },
      system: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }],
    });
    expect(reply.usage.output_tokens).toBe(3);
  });

  it("output_config.format json_schema makes the reply valid JSON against the schema", async () => {
    const schema = {
      type: "object",
      properties: { city: { type: "string", maxLength: 8 } },
      required: ["city"],
      additionalProperties: false,
    };
    const reply = await client.messages.create({ ...greedy, max_tokens: 60, output_config: { format: { type: "json_schema", schema } } });
    expect(reply.stop_reason).toBe("end_turn");
    expect(ajv.validate(schema, JSON.parse(textOf(reply))), ajv.errorsText()).toBe(true);
  });

  describe("tools", () => {
    it('tool_choice "any" always produces valid tool_use blocks, with stop_reason tool_use', async () => {
      const reply = await client.messages.create({ ...greedy, max_tokens: 200, tools, tool_choice: { type: "any" } });
      expect(reply.stop_reason).toBe("tool_use");
      expectValidToolUses(reply.content);
    });

    it('tool_choice {"type": "tool"} calls that tool, once with disable_parallel_tool_use', async () => {
      const reply = await client.messages.create({
        ...greedy,
        max_tokens: 200,
        tools,
        tool_choice: { type: "tool", name: "add", disable_parallel_tool_use: true },
      });
      const uses = expectValidToolUses(reply.content);
      expect(uses).toHaveLength(1);
      expect(uses[0]?.name).toBe("add");
    });

    it("a tool_use → tool_result round trip continues the conversation", async () => {
      const call = await client.messages.create({ ...greedy, max_tokens: 200, tools, tool_choice: { type: "tool", name: "get_weather" } });
      const [use] = expectValidToolUses(call.content);
      const followUp: Anthropic.MessageParam[] = [
        ...messages,
        { role: "assistant", content: call.content as Anthropic.ContentBlockParam[] },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: use!.id, content: '{"temperature": 21}' },
            { type: "text", text: "Thanks." },
          ],
        },
      ];
      const answer = await client.messages.create({ ...greedy, messages: followUp, tools, tool_choice: { type: "none" } });
      expect(answer.content.every((block) => block.type === "text")).toBe(true);
      expect(["end_turn", "max_tokens"]).toContain(answer.stop_reason);
      // The result is in the prompt: the conversation with it counts more tokens.
      const withResult = await client.messages.countTokens({ model: "tiny", messages: followUp, tools });
      const withoutResult = await client.messages.countTokens({
        model: "tiny",
        tools,
        messages: [
          ...followUp.slice(0, 2),
          {
            role: "user",
            content: [
              { type: "tool_result", tool_use_id: use!.id },
              { type: "text", text: "Thanks." },
            ],
          },
        ],
      });
      expect(withResult.input_tokens).toBeGreaterThan(withoutResult.input_tokens);
    });

    it("streams tool input as input_json_delta; the SDK's final message has the parsed input", async () => {
      const request = { ...greedy, max_tokens: 200, tools, tool_choice: { type: "tool" as const, name: "add" } };
      const plain = await client.messages.create(request);
      const stream = client.messages.stream(request);
      let json = "";
      stream.on("inputJson", (partial) => (json += partial));
      const final = await stream.finalMessage();
      const [use] = expectValidToolUses(final.content);
      expect(JSON.parse(json)).toEqual(use!.input);
      expect(final.stop_reason).toBe("tool_use");
      expect(final.content.map((block) => (block.type === "tool_use" ? [block.name, block.input] : block.type))).toEqual(
        plain.content.map((block) => (block.type === "tool_use" ? [block.name, block.input] : block.type)),
      );
    });
  });

  describe("errors, in the Messages shape, and the server still serving", () => {
    async function expectError(body: unknown, status: number, type: string, message: RegExp): Promise<void> {
      const response = await postJson(`${server.url}/v1/messages`, body);
      expect(response.status).toBe(status);
      // request_id: the id of the request-id header (and of x-request-id), as Anthropic's errors carry.
      expect(await response.json()).toEqual({
        type: "error",
        error: { type, message: expect.stringMatching(message) },
        request_id: response.headers.get("request-id"),
      });
    }
    const base = { model: "tiny", max_tokens: 5, messages };

    it("answers each bad request with a 400 invalid_request_error that names the problem", async () => {
      await expectError({ model: "tiny", messages }, 400, "invalid_request_error", /max_tokens/);
      await expectError({ ...base, model: undefined }, 400, "invalid_request_error", /model/);
      await expectError({ ...base, messages: [] }, 400, "invalid_request_error", /messages/);
      await expectError({ ...base, messages: [{ role: "system", content: "x" }] }, 400, "invalid_request_error", /system/);
      await expectError("{not json", 400, "invalid_request_error", /JSON/);
      await expectError({ ...base, temperature: 1.5 }, 400, "invalid_request_error", /temperature/);
      await expectError(
        {
          ...base,
          messages: [
            { role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }] },
          ],
        },
        400,
        "invalid_request_error",
        /`tiny` does not read images/,
      );
      await expectError(
        { ...base, messages: [{ role: "user", content: [{ type: "document", source: { type: "text", data: "x" } }] }] },
        400,
        "invalid_request_error",
        /'document' are not supported/,
      );
      await expectError(
        { ...base, tools: [{ type: "web_search_20250305", name: "web_search" }] },
        400,
        "invalid_request_error",
        /server tools/,
      );
      await expectError(
        { ...base, tools: [{ name: "f", input_schema: { type: "string" } }] },
        400,
        "invalid_request_error",
        /"type": "object"/,
      );
      await expectError({ ...base, tool_choice: { type: "any" } }, 400, "invalid_request_error", /needs 'tools'/);
      await expectError(
        { ...base, tools, tool_choice: { type: "tool", name: "nope" } },
        400,
        "invalid_request_error",
        /no tool named 'nope'/,
      );
      await expectError(
        { ...base, messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_unknown", content: "x" }] }] },
        400,
        "invalid_request_error",
        /toolu_unknown/,
      );
      await expectError({ ...base, stop_sequences: [""] }, 400, "invalid_request_error", /stop_sequences\[0\]/);
    });

    it("refuses an unknown model with 404 not_found_error, and a prompt over the context with 400", async () => {
      await expectError({ ...base, model: "nope" }, 404, "not_found_error", /`nope` does not exist/);
      // What the request asks of the model (an image) is beside the point when there is no such model.
      const image = { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } };
      await expectError(
        { ...base, model: "nope", messages: [{ role: "user", content: [image] }] },
        404,
        "not_found_error",
        /`nope` does not exist/,
      );
      await expect(client.messages.create({ ...base, model: "nope" })).rejects.toBeInstanceOf(Anthropic.NotFoundError);
      await expect(client.messages.countTokens({ model: "nope", messages })).rejects.toBeInstanceOf(Anthropic.NotFoundError);
      await expectError(
        { ...base, messages: [{ role: "user", content: "word ".repeat(5000) }] },
        400,
        "invalid_request_error",
        /maximum context length/,
      );
    });

    it("answers an unknown URL under /v1/messages with 404 in its shape, and a body over the limit with 413", async () => {
      const response = await postJson(`${server.url}/v1/messages/batches`, {});
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ type: "error", error: { type: "not_found_error" } });
      const large = await postJson(`${server.url}/v1/messages`, {
        ...base,
        messages: [{ role: "user", content: "x".repeat(11 * 1024 * 1024) }],
      });
      expect(large.status).toBe(413);
      expect(await large.json()).toMatchObject({ type: "error", error: { type: "request_too_large" } });
    });

    it("gives the request's id as the SDK reads it: request-id on replies and errors, request_id in error bodies", async () => {
      const { response, request_id } = await client.messages.create({ ...greedy, max_tokens: 1 }).withResponse();
      expect(request_id).toMatch(/^[0-9a-f-]{36}$/);
      expect(response.headers.get("x-request-id")).toBe(request_id);
      const reply = await client.messages.create({ ...greedy, max_tokens: 1 });
      expect(reply._request_id).toMatch(/^[0-9a-f-]{36}$/);
      const counted = await client.messages.countTokens({ model: "tiny", messages });
      expect(counted._request_id).toMatch(/^[0-9a-f-]{36}$/);
      const streamed = await client.messages.create({ ...greedy, max_tokens: 1, stream: true }).withResponse();
      for await (const event of streamed.data) void event;
      expect(streamed.request_id).toBe(streamed.response.headers.get("x-request-id"));
      // A well-formed incoming x-request-id (a proxy's) is the id in every place.
      const refused = await client.messages
        .create({ ...base, max_tokens: 0 }, { headers: { "x-request-id": "proxy-req-7" } })
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(Anthropic.BadRequestError);
      expect((refused as InstanceType<typeof Anthropic.APIError>).requestID).toBe("proxy-req-7");
      expect((refused as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: "error", request_id: "proxy-req-7" });
      // Unknown URLs under /v1/messages too.
      const unknown = await postJson(`${server.url}/v1/messages/batches`, {});
      expect(await unknown.json()).toMatchObject({ request_id: unknown.headers.get("x-request-id") });
    });

    it("maps statuses to the SDK's error classes, and still serves afterwards", async () => {
      await expect(client.messages.create({ ...base, max_tokens: 0 })).rejects.toBeInstanceOf(Anthropic.BadRequestError);
      const reply = await client.messages.create({ ...greedy, max_tokens: 2 });
      expect(reply.usage.output_tokens).toBe(2);
    });
  });
});
