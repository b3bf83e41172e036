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

  it("runs the tool phase, feeds results back, and streams a final answer", async () => {
    const { stdout, stderr } = await run(process.execPath, ["--import", "tsx", "examples/tool-loop.ts", "Weather in Paris?"], {
      cwd: repo,
      env: { ...process.env, OPENAI_BASE_URL: `${server.url}/v1`, OPENAI_API_KEY: "local", MODEL: "tiny", TOOL_CHOICE: "required", MAX_TOKENS: "600" },
      timeout: 120_000,
    });
    // The first round was forced to call: each call ran and its result went back to the model.
    expect(stderr).toMatch(/^\[round 1\] (get_weather|add)\(\{.*\}\) -> \{.*\}$/m);
    expect(stdout.length).toBeGreaterThan(1);
  });
});
