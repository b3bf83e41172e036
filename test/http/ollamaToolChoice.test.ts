import { Ajv } from "ajv";
import { Ollama, type ChatRequest, type ChatResponse, type Message, type Tool } from "ollama";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";
import { weatherSchema as weather } from "../support/toolSchemas.js";

// `tool_choice` on /api/chat, an extension (the reference server ignores it; ollama-ai-provider-v2
// sends it): honoured as /v1 honours it. The `ollama` client sends fields it does not know as they
// are, so it is used as is. The model has random weights: left to itself it almost never calls.

const add = {
  type: "object",
  properties: { a: { type: "number" }, b: { type: "number" } },
  required: ["a", "b"],
  additionalProperties: false,
};
const tools: Tool[] = [
  { type: "function", function: { name: "get_weather", description: "Current weather in a city", parameters: weather as never } },
  { type: "function", function: { name: "add", description: "Add two numbers", parameters: add as never } },
];
const ajv = new Ajv({ strict: false });
const validators: Record<string, ReturnType<typeof ajv.compile>> = { get_weather: ajv.compile(weather), add: ajv.compile(add) };
const messages: Message[] = [{ role: "user", content: "What is the weather in Paris, and what is 2+3?" }];

type ToolChoice = "none" | "auto" | "required" | { type: "function"; name: string } | { type: "function"; function: { name: string } };

function expectValidCalls(reply: ChatResponse | ChatResponse[]): Array<{ name: string }> {
  const calls = (Array.isArray(reply) ? reply : [reply]).flatMap((part) => part.message.tool_calls ?? []);
  expect(calls.length).toBeGreaterThan(0);
  for (const { function: call } of calls) {
    const validate = validators[call.name];
    expect(validate, `a known function, got ${call.name}`).toBeDefined();
    expect(typeof call.arguments).toBe("object");
    expect(validate!(call.arguments), JSON.stringify(validate!.errors)).toBe(true);
  }
  return calls.map((call) => ({ name: call.function.name }));
}

describe("tool_choice on /api/chat", () => {
  let server: TestServer;
  let ollama: Ollama;

  beforeAll(async () => {
    server = await startTestServer({
      models: { tiny: await testModelPath("tiny") },
      manifest: { models: [{ file: "tiny.gguf", id: "tiny:1b" }] },
      config: { contextSize: 2048 },
    });
    ollama = new Ollama({ host: server.url });
  });
  afterAll(() => server?.close());

  /** A chat with `tool_choice`, which the client's types do not know and its requests carry as they are. */
  function chat(tool_choice: ToolChoice, seed: number): Promise<ChatResponse>;
  function chat(tool_choice: ToolChoice, seed: number, stream: true): Promise<AsyncIterable<ChatResponse>>;
  function chat(tool_choice: ToolChoice, seed: number, stream = false): Promise<ChatResponse | AsyncIterable<ChatResponse>> {
    const request = {
      model: "tiny:1b",
      messages,
      tools,
      tool_choice,
      options: { temperature: 0.8, seed, num_predict: 400 },
    } as ChatRequest;
    return stream ? ollama.chat({ ...request, stream: true }) : ollama.chat({ ...request, stream: false });
  }

  it('"required" always calls, with arguments valid against the function\'s schema, streamed or not', async () => {
    for (const seed of [1, 2, 3]) {
      const reply = await chat("required", seed);
      expectValidCalls(reply);
      expect(reply.done_reason).toBe("stop");
      const parts: ChatResponse[] = [];
      for await (const part of await chat("required", seed, true)) parts.push(part);
      expect(expectValidCalls(parts)).toEqual(expectValidCalls(reply));
    }
  });

  it("a named function is the one called, exactly once, flat (as ollama-ai-provider-v2 sends it) or nested (as /v1)", async () => {
    for (const tool_choice of [
      { type: "function", name: "add" },
      { type: "function", function: { name: "get_weather" } },
    ] as const) {
      const name = "name" in tool_choice ? tool_choice.name : tool_choice.function.name;
      for (const seed of [1, 2]) expect(expectValidCalls(await chat(tool_choice, seed))).toEqual([{ name }]);
    }
  });

  it("num_predict bounds a forced call, its opening included: done_reason length at the limit", async () => {
    for (const num_predict of [1, 5, 40]) {
      const request = {
        model: "tiny:1b",
        messages,
        tools,
        tool_choice: { type: "function", name: "get_weather" },
        options: { temperature: 0, num_predict },
      } as ChatRequest;
      const reply = await ollama.chat({ ...request, stream: false });
      expect([num_predict, reply.eval_count, reply.done_reason]).toEqual([num_predict, num_predict, "length"]);
    }
  });

  it('"none" calls nothing, and shows the model no tools', async () => {
    const withoutTools = await ollama.chat({ model: "tiny:1b", messages, options: { temperature: 0, num_predict: 8 } });
    for (const seed of [1, 2, 3]) {
      const reply = await chat("none", seed);
      expect(reply.message.tool_calls).toBeUndefined();
      // The prompt is the one without tools: they are not rendered into it.
      expect(reply.prompt_eval_count).toBe(withoutTools.prompt_eval_count);
    }
    const auto = await chat("auto", 1);
    expect(auto.prompt_eval_count).toBeGreaterThan(withoutTools.prompt_eval_count);
  });

  it("an unknown function, or a call required without tools, is a 400 in the native error shape", async () => {
    for (const [body, pattern] of [
      [{ tools, tool_choice: { type: "function", name: "nope" } }, /tool_choice\.name.*no tool named 'nope'/],
      [{ tools, tool_choice: { type: "function", function: { name: "nope" } } }, /tool_choice\.function\.name.*no tool named 'nope'/],
      [{ tool_choice: "required" }, /only allowed when 'tools' are specified/],
      [{ tools, tool_choice: "sometimes" }, /tool_choice/],
      [{ tools, tool_choice: { type: "web_search_preview" } }, /tool_choice/],
    ] as const) {
      const response = await postJson(`${server.url}/api/chat`, { model: "tiny:1b", messages, stream: false, ...body });
      expect(response.status).toBe(400);
      const error = (await response.json()) as { error: unknown };
      expect(Object.keys(error)).toEqual(["error"]);
      expect(error.error).toMatch(pattern);
    }
    await expect(chat({ type: "function", name: "nope" }, 1)).rejects.toMatchObject({
      status_code: 400,
      error: expect.stringMatching(/no tool named 'nope'/),
    });
  });
});
