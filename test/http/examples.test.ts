import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

const run = promisify(execFile);
const repo = path.resolve(import.meta.dirname, "../..");

describe("examples/tool-loop.ts", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { contextSize: 4096 } });
  });
  afterAll(() => server?.close());

  it("runs the tool phase, feeds each result back, and streams the model's answer to that conversation", async () => {
    const question = "Weather in Paris?";
    const { stdout, stderr } = await run(process.execPath, ["--import", "tsx", "examples/tool-loop.ts", question], {
      cwd: repo,
      env: {
        ...process.env,
        OPENAI_BASE_URL: `${server.url}/v1`,
        OPENAI_API_KEY: "local",
        MODEL: "tiny",
        TOOL_CHOICE: "required",
        MAX_TOKENS: "600",
        TEMPERATURE: "0",
      },
      timeout: 120_000,
    });
    // The first round was forced to call; the tiny model never opens a call by itself, so later
    // rounds end the tool phase. Each call ran, and its line shows the function's true result.
    const calls = stderr.trimEnd().split("\n").map(parseCallLine);
    expect(calls.length).toBeGreaterThan(0);
    for (const call of calls) {
      expect(call.round).toBe(1);
      expect(JSON.parse(call.result)).toEqual(toyResult(call.name, JSON.parse(call.arguments) as Record<string, unknown>));
    }

    // The streamed answer is the model's reply to the conversation the example built (greedy, so
    // asking again for the same conversation gives the same text), then a newline.
    const ids = calls.map((_, index) => `call_${index}`);
    const answer = await server.client.chat.completions.create({
      model: "tiny",
      messages: [
        { role: "system", content: "You are a helpful assistant. Use the tools when they help." },
        { role: "user", content: question },
        {
          role: "assistant",
          content: null,
          tool_calls: calls.map((call, index) => ({
            id: ids[index]!,
            type: "function",
            function: { name: call.name, arguments: call.arguments },
          })),
        },
        ...calls.map((call, index) => ({ role: "tool" as const, tool_call_id: ids[index]!, content: call.result })),
      ],
      temperature: 0,
      max_tokens: 600,
    });
    const text = answer.choices[0]?.message.content ?? "";
    expect(text.length).toBeGreaterThan(0);
    expect(stdout).toBe(`${text}\n`);
  });
});

/** One stderr line of the example: `[round N] name(arguments) -> result`. */
function parseCallLine(line: string): { round: number; name: string; arguments: string; result: string } {
  const match = /^\[round (\d+)\] (\w+)\((.*)\) -> (.*)$/s.exec(line);
  if (!match) throw new Error(`not a call line: ${JSON.stringify(line)}`);
  return { round: Number(match[1]), name: match[2]!, arguments: match[3]!, result: match[4]! };
}

/** What the example's toy functions answer, as its comments promise. */
function toyResult(name: string, args: Record<string, unknown>): unknown {
  if (name === "add") return { sum: Number(args.a) + Number(args.b) };
  const { city, unit = "celsius" } = args;
  const celsius = 10 + ((String(city).length * 7) % 20);
  return { city, unit, temperature: unit === "fahrenheit" ? Math.round(celsius * 1.8 + 32) : celsius, sky: "clear" };
}
