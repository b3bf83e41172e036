// Issue 31: llama-server's POST /apply-template, the prompt a chat completion's body becomes, as the
// model reads it: users debug templates with it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

describe("POST /apply-template", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({
      models: { tiny: await testModelPath("tiny"), think: await testModelPath("think-tiny"), embed: await testModelPath("embed-tiny") },
    });
  });
  afterAll(() => server?.close());

  const messages = [
    { role: "system", content: "You answer in one word." },
    { role: "user", content: "Which city is the capital of France?" },
  ];
  const tools = [
    {
      type: "function",
      function: {
        name: "get_weather",
        description: "The weather in a city",
        parameters: { type: "object", properties: { city: { type: "string" } } },
      },
    },
  ];

  async function applyTemplate(body: unknown, path = "/apply-template"): Promise<string> {
    const response = await postJson(`${server.url}${path}`, body);
    const answer = (await response.json()) as { prompt: string };
    expect(response.status, JSON.stringify(answer)).toBe(200);
    expect(Object.keys(answer)).toEqual(["prompt"]);
    return answer.prompt;
  }

  it("answers the prompt the chat completion reads: the same tokens that its usage counts", async () => {
    const prompt = await applyTemplate({ model: "tiny", messages });
    expect(prompt).toContain("You answer in one word.");
    expect(prompt).toContain("Which city is the capital of France?");
    const completion = await server.client.chat.completions.create({
      model: "tiny",
      messages: messages as never,
      max_tokens: 1,
      temperature: 0,
    });
    const tokenized = await postJson(`${server.url}/tokenize`, { model: "tiny", content: prompt, parse_special: true, add_special: false });
    const { tokens } = (await tokenized.json()) as { tokens: number[] };
    expect(tokens).toHaveLength(completion.usage!.prompt_tokens);
  });

  it("renders the tools the request gives, and none under tool_choice none", async () => {
    const withTools = await applyTemplate({ model: "tiny", messages, tools });
    expect(withTools).toContain("get_weather");
    expect(withTools).toContain("The weather in a city");
    const none = await applyTemplate({ model: "tiny", messages, tools, tool_choice: "none" });
    expect(none).not.toContain("get_weather");
    expect(await applyTemplate({ model: "tiny", messages }, "/v1/apply-template")).toBe(await applyTemplate({ model: "tiny", messages }));
  });

  // Issue 31: turning thinking off writes what the template writes for it, and nothing where it has no thought section.
  it("turns thinking off as the template does, and adds no thought markup to a template without one", async () => {
    const off = { messages, reasoning_effort: "none" };
    expect(await applyTemplate({ model: "tiny", ...off })).toBe(await applyTemplate({ model: "tiny", messages }));
    expect(await applyTemplate({ model: "tiny", ...off })).not.toContain("<think>");
    const thinkingOff = await applyTemplate({ model: "think", ...off });
    expect(thinkingOff.endsWith("<think>\n\n</think>\n\n")).toBe(true);
    expect(await applyTemplate({ model: "think", messages })).not.toContain("</think>");
  });

  it("refuses a bad body, an unknown model and a model that does not chat, in OpenAI's error shape", async () => {
    const cases: Array<[unknown, number, RegExp]> = [
      [{ model: "tiny" }, 400, /messages/],
      [{ model: "nope", messages }, 404, /nope/],
      [{ model: "embed", messages }, 400, /embed/],
    ];
    for (const [body, status, message] of cases) {
      const response = await postJson(`${server.url}/apply-template`, body);
      const answer = (await response.json()) as { error: { message: string; type: string } };
      expect(response.status, JSON.stringify(answer)).toBe(status);
      expect(answer.error.message).toMatch(message);
    }
  });
});
