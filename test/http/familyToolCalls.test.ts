import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatFormatOf } from "../../src/chatTemplates/chatFormats.js";
import { familyModelName, familyTemplate, serveFamilies } from "../support/familyServer.js";
import { CALL_SYNTAX_OF, TOOL_CALL_FAMILIES } from "../support/familyCases.js";
import { forcedWeatherTool } from "../support/toolSchemas.js";
import { postJson, readSseEvents, type TestServer } from "../support/startTestServer.js";

/**
 * Tool calls in each family's own syntax, on tiny weights carrying that family's real template
 * (llama.cpp's models/templates): a forced call (`required`, and a named function) is written under
 * the grammar built from the family's delimiters and read back into `tool_calls`, through each API,
 * streamed and not; then the call and its result, sent back as the next request's history, render
 * with the family's template (Mistral Nemo's checks its call ids).
 */

const weather = forcedWeatherTool;
const time = {
  name: "get_time",
  description: "Get the time in a time zone",
  parameters: { type: "object", properties: { zone: { type: "string", enum: ["UTC"] } }, required: ["zone"], additionalProperties: false },
};
const question = [{ role: "user", content: "What is the weather in Paris?" }];

let server: TestServer;
const templates: Record<string, string> = {};

beforeAll(async () => {
  for (const [family, file] of Object.entries(TOOL_CALL_FAMILIES)) templates[family] = await familyTemplate(file);
  const models = Object.fromEntries(
    Object.entries(TOOL_CALL_FAMILIES).map(([family, template]) => [familyModelName(family), { template }]),
  );
  // Tool prompts run long in the test vocabulary's bytes: Llama 3.1's and Granite's past a thousand tokens.
  server = await serveFamilies(models, { maxLoadedModels: 1, contextSize: 4096 });
}, 120_000);

afterAll(async () => {
  await server?.close();
});

describe.each(Object.keys(TOOL_CALL_FAMILIES))("%s", (family) => {
  const model = familyModelName(family);

  it("is recognised from its template", () => {
    expect(chatFormatOf(templates[family]!).name).toBe(CALL_SYNTAX_OF[family] ?? family);
  });

  for (const choice of ["required", { type: "function", function: { name: "get_weather" } }] as const) {
    const mode = typeof choice === "string" ? choice : "named";
    it(`writes a ${mode} call and reads it back, streamed and not; the call and its result render as history`, async () => {
      const body = {
        model,
        messages: question,
        // Command R7B's preamble takes most of the tiny model's 4096 tokens (the context is capped
        // at the file's training length) in the test vocabulary's bytes: one tool leaves room to reply.
        tools: (family === "Command R7B" ? [weather] : [weather, time]).map((f) => ({ type: "function", function: f })),
        tool_choice: choice,
        max_tokens: 256,
        parallel_tool_calls: false,
        // Greedy: the streamed request writes the same call.
        temperature: 0,
      };
      const response = await postJson(`${server.url}/v1/chat/completions`, body);
      const completion = (await response.json()) as {
        choices: Array<{
          finish_reason: string;
          message: { tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }> };
        }>;
      };
      expect(response.status, JSON.stringify(completion)).toBe(200);
      const [choiceOut] = completion.choices;
      expect(choiceOut!.finish_reason).toBe("tool_calls");
      const calls = choiceOut!.message.tool_calls!;
      const first = calls[0]!;
      if (mode === "named") expect(first.function.name).toBe("get_weather");
      const expected = first.function.name === "get_weather" ? { city: "Paris" } : { zone: "UTC" };
      expect(JSON.parse(first.function.arguments)).toEqual(expected);

      const streamed = await postJson(`${server.url}/v1/chat/completions`, { ...body, stream: true });
      const chunks = (await readSseEvents(streamed)).filter((data) => data !== "[DONE]").map((data) => JSON.parse(data));
      const args = chunks
        .flatMap((chunk) => chunk.choices[0]?.delta?.tool_calls ?? [])
        .filter((delta: { index: number }) => delta.index === 0)
        .map((delta: { function?: { arguments?: string } }) => delta.function?.arguments ?? "")
        .join("");
      expect(args).toBe(first.function.arguments);
      expect(chunks.at(-1).choices[0]?.finish_reason ?? chunks.at(-2).choices[0]?.finish_reason).toBe("tool_calls");

      // The round trip: the call and its result as the next turn's history.
      const history = [
        ...question,
        { role: "assistant", content: null, tool_calls: calls.map((call) => ({ ...call, type: "function" })) },
        ...calls.map((call) => ({ role: "tool", tool_call_id: call.id, content: '{"temperature": 21}' })),
      ];
      const next = await postJson(`${server.url}/apply-template`, { model, messages: history, tools: body.tools });
      const prompt = (await next.json()) as { prompt: string };
      expect(next.status, JSON.stringify(prompt)).toBe(200);
      if (family === "Phi-4-mini") {
        // Its template prints no past calls: the tools, in the system message as its model card has them, and the results.
        expect(prompt.prompt).toMatch(/^<\|system\|><\|tool\|>\[\{"name": "get_weather", "description": .*<\|\/tool\|><\|end\|>/);
        expect(prompt.prompt).toContain('<|tool|>{"temperature": 21}<|end|>');
      } else if (family !== "generic") {
        // Templates without tool support (the generic form) do not print past calls.
        expect(prompt.prompt).toContain(first.function.name);
      }
    });
  }

  it("says in /api/show what its template supports: tools where it shows them, thinking where it has a thought section", async () => {
    const shown = (await (await postJson(`${server.url}/api/show`, { model })).json()) as { capabilities: string[]; template: string };
    expect(shown.template).toBe(templates[family]);
    const format = chatFormatOf(templates[family]!);
    expect(shown.capabilities.includes("thinking")).toBe(format.thought !== undefined);
    // Phi-3.5's template has no tools, and DeepSeek's print past calls but never list the tools
    // offered; the others list them.
    const unlisted = ["generic", "DeepSeek R1", "DeepSeek V3.1"];
    expect(shown.capabilities.includes("tools")).toBe(!unlisted.includes(family));
    // /v1/models says the same, beside the endpoints the model serves.
    const listed = ((await (await fetch(`${server.url}/v1/models`)).json()) as { data: Array<{ id: string; capabilities: string[] }> })
      .data;
    const capabilities = listed.find((each) => each.id === model)!.capabilities;
    expect(capabilities.includes("tools")).toBe(!unlisted.includes(family));
    expect(capabilities.includes("thinking")).toBe(format.thought !== undefined);
  });

  it("writes a required call through /api/chat, /v1/messages and /v1/responses", async () => {
    const tools = [weather].map((f) => ({ type: "function", function: f }));
    const ollama = (await (
      await postJson(`${server.url}/api/chat`, { model, messages: question, tools, stream: false, options: { num_predict: 256 } })
    ).json()) as { message: { tool_calls?: Array<{ function: { name: string; arguments: unknown } }> } };
    // Ollama's native API has no tool_choice: the model decides; a call, if any, is read back whole.
    for (const call of ollama.message.tool_calls ?? []) expect(call.function.arguments).toEqual({ city: "Paris" });

    const anthropic = await postJson(`${server.url}/v1/messages`, {
      model,
      max_tokens: 256,
      messages: question,
      tools: [{ name: weather.name, description: weather.description, input_schema: weather.parameters }],
      // One call: with random weights a parallel section would go on until max_tokens.
      tool_choice: { type: "any", disable_parallel_tool_use: true },
    });
    const message = (await anthropic.json()) as { stop_reason: string; content: Array<{ type: string; input?: unknown }> };
    expect(message.stop_reason).toBe("tool_use");
    expect(message.content.find((block) => block.type === "tool_use")?.input).toEqual({ city: "Paris" });

    const responses = await postJson(`${server.url}/v1/responses`, {
      model,
      input: "What is the weather in Paris?",
      tools: [{ type: "function", ...weather }],
      tool_choice: "required",
      parallel_tool_calls: false,
      max_output_tokens: 256,
    });
    const output = (await responses.json()) as { output: Array<{ type: string; name?: string; arguments?: string }> };
    const call = output.output.find((item) => item.type === "function_call");
    expect(call?.name).toBe("get_weather");
    expect(JSON.parse(call!.arguments!)).toEqual({ city: "Paris" });
  });
});
