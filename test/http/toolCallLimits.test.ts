import Anthropic from "@anthropic-ai/sdk";
import fc from "fast-check";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";
import { weatherSchema } from "../support/toolSchemas.js";

// A call forced by name is opened by the template: the opening and the name are written for the
// model, then its arguments are sampled. All of it is output, so max_tokens bounds all of it: the
// hosted profile reserves max_tokens, and completion tokens must never exceed it (issue 29).

type Api = "chat" | "responses" | "messages";

/** What each API says of one reply, in common terms. */
interface Outcome {
  completionTokens: number;
  /** The limit cut the reply (finish_reason length, incomplete max_output_tokens, stop_reason max_tokens). */
  cut: boolean;
  /** Arguments of the calls given out. */
  calls: Array<{ name: string; arguments: string }>;
}

const messages = [{ role: "user" as const, content: "What is the weather in Paris?" }];

describe("a forced call and max_tokens", () => {
  let server: TestServer;
  let anthropic: Anthropic;

  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { contextSize: 2048 } });
    anthropic = new Anthropic({ baseURL: server.url, apiKey: "any-value-works-locally", maxRetries: 0 });
  });
  afterAll(() => server?.close());

  async function chat(maxTokens: number, stream: boolean, seed: number): Promise<Outcome> {
    const request = {
      model: "tiny",
      messages,
      tools: [{ type: "function" as const, function: { name: "get_weather", parameters: weatherSchema } }],
      tool_choice: { type: "function" as const, function: { name: "get_weather" } },
      max_tokens: maxTokens,
      seed,
    };
    if (!stream) {
      const reply = await server.client.chat.completions.create(request);
      const calls = (reply.choices[0]?.message.tool_calls ?? []).map(
        (call) => (call as OpenAI.ChatCompletionMessageFunctionToolCall).function,
      );
      return { completionTokens: reply.usage!.completion_tokens, cut: reply.choices[0]?.finish_reason === "length", calls };
    }
    const chunks = await server.client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    const calls: Array<{ name: string; arguments: string }> = [];
    let finish: string | null = null;
    let completionTokens = -1;
    for await (const chunk of chunks) {
      if (chunk.usage) completionTokens = chunk.usage.completion_tokens;
      const choice = chunk.choices[0];
      if (!choice) continue;
      finish = choice.finish_reason ?? finish;
      for (const fragment of choice.delta.tool_calls ?? []) {
        const call = (calls[fragment.index] ??= { name: "", arguments: "" });
        call.name += fragment.function?.name ?? "";
        call.arguments += fragment.function?.arguments ?? "";
      }
    }
    return { completionTokens, cut: finish === "length", calls };
  }

  async function responses(maxTokens: number, seed: number): Promise<Outcome> {
    const response = await server.client.responses.create({
      model: "tiny",
      input: messages,
      tools: [{ type: "function", name: "get_weather", parameters: weatherSchema, strict: false }],
      tool_choice: { type: "function", name: "get_weather" },
      max_output_tokens: maxTokens,
      // The Responses API has no seed: a temperature of 0 keeps the property reproducible.
      temperature: seed === 0 ? 0 : 1,
      store: false,
    });
    const calls = response.output.flatMap((item) =>
      item.type === "function_call" ? [{ name: item.name, arguments: item.arguments }] : [],
    );
    const cut = response.status === "incomplete";
    if (cut) expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" });
    return { completionTokens: response.usage!.output_tokens, cut, calls };
  }

  async function messagesApi(maxTokens: number, stream: boolean): Promise<Outcome> {
    const request = {
      model: "tiny",
      messages,
      tools: [{ name: "get_weather", input_schema: weatherSchema as unknown as Anthropic.Tool.InputSchema }],
      tool_choice: { type: "tool" as const, name: "get_weather" },
      max_tokens: maxTokens,
    };
    const reply = stream ? await anthropic.messages.stream(request).finalMessage() : await anthropic.messages.create(request);
    const calls = reply.content.flatMap((block) =>
      block.type === "tool_use" ? [{ name: block.name, arguments: JSON.stringify(block.input) }] : [],
    );
    return { completionTokens: reply.usage.output_tokens, cut: reply.stop_reason === "max_tokens", calls };
  }

  function ask(api: Api, maxTokens: number, stream: boolean, seed: number): Promise<Outcome> {
    if (api === "chat") return chat(maxTokens, stream, seed);
    if (api === "responses") return responses(maxTokens, seed);
    return messagesApi(maxTokens, stream);
  }

  /** Within the limit always; exactly at it when cut; otherwise one whole call of the forced function. */
  function expectBounded(outcome: Outcome, maxTokens: number): void {
    expect(outcome.completionTokens).toBeGreaterThanOrEqual(0);
    expect(outcome.completionTokens).toBeLessThanOrEqual(maxTokens);
    if (outcome.cut) {
      expect(outcome.completionTokens).toBe(maxTokens);
    } else {
      expect(outcome.calls).toHaveLength(1);
      expect(outcome.calls[0]?.name).toBe("get_weather");
      expect(JSON.parse(outcome.calls[0]!.arguments)).toMatchObject({ unit: expect.stringMatching(/^(celsius|fahrenheit)$/) });
    }
    for (const call of outcome.calls) expect(call.name).toBe("get_weather");
  }

  for (const api of ["chat", "responses", "messages"] as const) {
    it(`${api}: a limit shorter than the call's opening ends the reply there, at the limit, finish length`, async () => {
      for (const maxTokens of [1, 2, 5]) {
        for (const stream of api === "responses" ? [false] : [false, true]) {
          const outcome = await ask(api, maxTokens, stream, 0);
          expect(outcome, `max_tokens ${maxTokens}, stream ${stream}`).toEqual({ completionTokens: maxTokens, cut: true, calls: [] });
        }
      }
    });

    it(`${api}: a limit that fits the whole call leaves it uncut, and counts it within the limit`, async () => {
      const outcome = await ask(api, 400, false, 0);
      expect(outcome.cut).toBe(false);
      expectBounded(outcome, 400);
    });
  }

  it("over any max_tokens and any API, completion tokens never exceed the limit, and a cut says length", async () => {
    // The tiny model's opening is some 30 tokens (its generic ||call syntax, byte by byte): the
    // range covers limits short of it, at it, inside the arguments, and past the whole call.
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 120 }),
        fc.constantFrom<Api>("chat", "responses", "messages"),
        fc.boolean(),
        fc.integer({ min: 0, max: 1000 }),
        async (maxTokens, api, stream, seed) => {
          expectBounded(await ask(api, maxTokens, stream, seed), maxTokens);
        },
      ),
      { numRuns: 40 },
    );
  });
});
