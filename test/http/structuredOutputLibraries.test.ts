// Issue 29 §1, through the libraries developers build on: each turns a zod 4 schema into JSON Schema
// its own way and sends it to the server by changing only the base URL. zod writes `.int()` as
// `{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}`, and an email,
// `.positive()` or `.min(1)` as more keywords beside it: every one of them must be accepted, and
// enforced by the grammar, so the answer parses with the same zod schema.
import { ChatAnthropic } from "@langchain/anthropic";
import { ChatOllama } from "@langchain/ollama";
import { ChatOpenAI } from "@langchain/openai";
import { Agent, OpenAIProvider, run, setTracingDisabled, tool } from "@openai/agents";
import { createOpenAI } from "@ai-sdk/openai";
import { generateObject, generateText, Output } from "ai";
import OpenAI from "openai";
import { zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

/** Ordinary fields, each of which zod writes with a keyword the server once refused. */
const person = z.object({
  name: z.string().min(1).max(12),
  age: z.number().int().nonnegative(),
  score: z.number().int().positive().max(100),
  tags: z
    .array(z.enum(["a", "b", "c"]))
    .min(1)
    .max(3),
});

const MAX_TOKENS = 200;
let server: TestServer;
let client: OpenAI;

beforeAll(async () => {
  server = await startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { contextSize: 2048 } });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0 });
  // The Agents SDK would otherwise export traces to OpenAI's servers.
  setTracingDisabled(true);
});
afterAll(() => server?.close());

const question = "Describe a person.";

describe("LangChain withStructuredOutput, an .int() field, in its three chat classes", () => {
  it("ChatOpenAI (/v1/chat/completions)", async () => {
    const model = new ChatOpenAI({
      model: "tiny",
      apiKey: "x",
      configuration: { baseURL: `${server.url}/v1` },
      maxTokens: MAX_TOKENS,
      temperature: 0,
      maxRetries: 0,
    });
    expect(person.parse(await model.withStructuredOutput(person).invoke(question))).toBeTruthy();
  });

  it("ChatOllama (/api/chat with format)", async () => {
    const model = new ChatOllama({ model: "tiny", baseUrl: server.url, numPredict: MAX_TOKENS, temperature: 0 });
    expect(person.parse(await model.withStructuredOutput(person).invoke(question))).toBeTruthy();
  });

  it("ChatAnthropic (/v1/messages, a forced tool with input_schema)", async () => {
    const model = new ChatAnthropic({
      model: "tiny",
      apiKey: "x",
      anthropicApiUrl: server.url,
      maxTokens: MAX_TOKENS,
      temperature: 0,
      maxRetries: 0,
    });
    expect(person.parse(await model.withStructuredOutput(person).invoke(question))).toBeTruthy();
  });
});

describe("the openai package's zod helpers", () => {
  it("chat.completions.parse with zodResponseFormat", async () => {
    const completion = await client.chat.completions.parse({
      model: "tiny",
      messages: [{ role: "user", content: question }],
      response_format: zodResponseFormat(person, "person"),
      max_tokens: MAX_TOKENS,
      temperature: 0,
    });
    expect(person.parse(completion.choices[0]?.message.parsed)).toBeTruthy();
  });

  it("responses.parse with zodTextFormat", async () => {
    const response = await client.responses.parse({
      model: "tiny",
      input: question,
      text: { format: zodTextFormat(person, "person") },
      max_output_tokens: MAX_TOKENS,
      temperature: 0,
    });
    expect(person.parse(response.output_parsed)).toBeTruthy();
  });
});

describe("the Vercel AI SDK on its default provider (the Responses API)", () => {
  const openai = () => createOpenAI({ baseURL: `${server.url}/v1`, apiKey: "x" });

  it("generateObject", async () => {
    const { object } = await generateObject({
      model: openai()("tiny"),
      schema: person,
      prompt: question,
      maxOutputTokens: MAX_TOKENS,
      temperature: 0,
      maxRetries: 0,
    });
    expect(person.parse(object)).toBeTruthy();
  });

  it("generateText with Output.object, and a tool with .int() parameters", async () => {
    const { output } = await generateText({
      model: openai()("tiny"),
      output: Output.object({ schema: person }),
      prompt: question,
      maxOutputTokens: MAX_TOKENS,
      temperature: 0,
      maxRetries: 0,
    });
    expect(person.parse(output)).toBeTruthy();
    const calls: unknown[] = [];
    const result = await generateText({
      model: openai()("tiny"),
      prompt: "Count to three.",
      tools: {
        count: {
          description: "Counts",
          inputSchema: z.object({ to: z.number().int().min(1).max(9) }),
          execute: async (input: unknown) => (calls.push(input), "done"),
        },
      },
      toolChoice: { type: "tool", toolName: "count" },
      maxOutputTokens: MAX_TOKENS,
      temperature: 0,
      maxRetries: 0,
    });
    expect(result.toolCalls).toHaveLength(1);
    expect(calls).toHaveLength(1);
    expect(z.object({ to: z.number().int().min(1).max(9) }).parse(calls[0])).toBeTruthy();
  });
});

describe("the OpenAI Agents SDK: a run with an .int() tool parameter", () => {
  const parameters = z.object({ count: z.number().int().min(1).max(5), label: z.string().max(8) });

  // The SDK's own provider (it brings its own version of the openai package), pointed at the server.
  for (const [api, useResponses] of [
    ["chat completions", false],
    ["Responses", true],
  ] as const) {
    it(`on the ${api} API`, async () => {
      const received: unknown[] = [];
      const repeat = tool({
        name: "repeat",
        description: "Repeats a label",
        parameters,
        execute: async (input) => (received.push(input), "repeated"),
      });
      const agent = new Agent({
        name: "counter",
        instructions: "Use the tool.",
        model: await new OpenAIProvider({ baseURL: `${server.url}/v1`, apiKey: "x", useResponses }).getModel("tiny"),
        tools: [repeat],
        modelSettings: { toolChoice: "required", maxTokens: MAX_TOKENS, temperature: 0 },
        // The tool's answer is the run's answer: the tiny model need not write a reply after it.
        toolUseBehavior: "stop_on_first_tool",
      });
      const result = await run(agent, "Repeat something.", { maxTurns: 2 });
      expect(result.finalOutput).toBe("repeated");
      expect(received).toHaveLength(1);
      expect(parameters.parse(received[0])).toBeTruthy();
    });
  }
});
