// Issue 31: real model families' chat templates (llama.cpp's models/templates, from the source
// node-llama-cpp ships) on the test model's weights, through POST /apply-template.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveFamilies } from "../support/familyServer.js";
import { forcedWeatherTool } from "../support/toolSchemas.js";
import { postJson, type TestServer } from "../support/startTestServer.js";

/** Served model name → llama.cpp's template file. */
const FAMILIES = {
  "qwen2.5": "Qwen-Qwen2.5-7B-Instruct.jinja",
  gemma2: "google-gemma-2-2b-it.jinja",
  "gpt-oss": "openai-gpt-oss-120b.jinja",
};

describe("real families' templates through /apply-template", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await serveFamilies(Object.fromEntries(Object.entries(FAMILIES).map(([name, template]) => [name, { template }])));
  }, 120_000);
  afterAll(async () => {
    await server?.close();
  });

  async function prompt(body: object): Promise<string> {
    const response = await postJson(`${server.url}/apply-template`, body);
    const answer = (await response.json()) as { prompt: string };
    expect(response.status, JSON.stringify(answer)).toBe(200);
    return answer.prompt;
  }
  const messages = [{ role: "user", content: "Which city is the capital of France?" }];

  it("adds no thought to a template that has none when thinking is turned off (Qwen2.5)", async () => {
    const off = await prompt({ model: "qwen2.5", messages, reasoning_effort: "none" });
    expect(off).not.toContain("<think>");
    expect(off).toBe(await prompt({ model: "qwen2.5", messages }));
  });

  it("refuses what the template refuses, with its own message, in each protocol's shape (Gemma 2: no system role)", async () => {
    const system = "You answer in one word.";
    const withSystem = [{ role: "system", content: system }, ...messages];
    const openai = await postJson(`${server.url}/v1/chat/completions`, { model: "gemma2", messages: withSystem });
    expect(openai.status).toBe(400);
    expect(((await openai.json()) as { error: { message: string; type: string } }).error).toMatchObject({
      message: "System role not supported",
      type: "invalid_request_error",
    });
    const template = await postJson(`${server.url}/apply-template`, { model: "gemma2", messages: withSystem });
    expect(template.status).toBe(400);
    const ollama = await postJson(`${server.url}/api/chat`, { model: "gemma2", messages: withSystem, stream: false });
    expect(ollama.status).toBe(400);
    expect(await ollama.json()).toEqual({ error: "System role not supported" });
    const anthropic = await postJson(`${server.url}/v1/messages`, { model: "gemma2", max_tokens: 8, system, messages });
    expect(anthropic.status).toBe(400);
    expect(await anthropic.json()).toMatchObject({
      type: "error",
      error: { type: "invalid_request_error", message: "System role not supported" },
    });
    // Without the system message the template renders, and so does the request.
    expect(await prompt({ model: "gemma2", messages })).toContain("<start_of_turn>user\nWhich city is the capital of France?<end_of_turn>");
  });

  it("keeps a past thought where the template prints it (gpt-oss's analysis before a call), sent back in each API's way", async () => {
    const thought = "The user wants the weather; call the function.";
    const call = { id: "call00001", name: "get_weather", arguments: '{"city": "Paris"}' };
    const tools = [{ type: "function", function: forcedWeatherTool }];
    const history = (reasoning: object) => [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, ...reasoning, tool_calls: [{ id: call.id, type: "function", function: call }] },
      { role: "tool", tool_call_id: call.id, content: '{"temperature": 21}' },
    ];
    const shown = await prompt({ model: "gpt-oss", messages: history({ reasoning_content: thought }), tools });
    expect(shown).toContain(`<|channel|>analysis<|message|>${thought}<|end|>`);
    const counted = async (reasoning: object) =>
      (
        (await (
          await postJson(`${server.url}/v1/chat/completions`, { model: "gpt-oss", messages: history(reasoning), tools, max_tokens: 1 })
        ).json()) as {
          usage: { prompt_tokens: number };
        }
      ).usage.prompt_tokens;
    const withThought = await counted({ reasoning_content: thought });
    expect(withThought).toBeGreaterThan(await counted({}));

    // Anthropic: the thinking block sent back before the tool_use block.
    const anthropic = await postJson(`${server.url}/v1/messages/count_tokens`, {
      model: "gpt-oss",
      tools: [{ name: forcedWeatherTool.name, description: forcedWeatherTool.description, input_schema: forcedWeatherTool.parameters }],
      messages: [
        { role: "user", content: "Weather in Paris?" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: thought, signature: "" },
            { type: "tool_use", id: call.id, name: call.name, input: { city: "Paris" } },
          ],
        },
        { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: '{"temperature": 21}' }] },
      ],
    });
    expect(((await anthropic.json()) as { input_tokens: number }).input_tokens).toBe(withThought);

    // Responses: a reasoning item before the function call.
    const responses = await postJson(`${server.url}/v1/responses`, {
      model: "gpt-oss",
      tools: [{ type: "function", ...forcedWeatherTool }],
      max_output_tokens: 1,
      input: [
        { role: "user", content: "Weather in Paris?" },
        { type: "reasoning", summary: [], content: [{ type: "reasoning_text", text: thought }] },
        { type: "function_call", call_id: call.id, name: call.name, arguments: call.arguments },
        { type: "function_call_output", call_id: call.id, output: '{"temperature": 21}' },
      ],
    });
    expect(((await responses.json()) as { usage: { input_tokens: number } }).usage.input_tokens).toBe(withThought);
  });
});
