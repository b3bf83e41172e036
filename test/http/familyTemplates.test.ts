// Issue 31: real model families' chat templates (llama.cpp's models/templates, from the source
// node-llama-cpp ships) on the test model's weights, through POST /apply-template.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestModel } from "../../src/testmodels/makeTestModel.js";
import { llamaCppSource } from "../support/llamaCppSource.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";

/** Served model name → llama.cpp's template file. */
const FAMILIES = {
  "qwen2.5": "Qwen-Qwen2.5-7B-Instruct.jinja",
};

describe("real families' templates through /apply-template", () => {
  let server: TestServer;
  let dir: string;

  beforeAll(async () => {
    const source = await llamaCppSource();
    dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-families-"));
    const models: Record<string, string> = {};
    for (const [name, file] of Object.entries(FAMILIES)) {
      const chatTemplate = await readFile(path.join(source, "models/templates", file), "utf8");
      models[name] = (await makeTestModel({ preset: "tiny", out: path.join(dir, `${name}.gguf`), chatTemplate })).path;
    }
    server = await startTestServer({ models });
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
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
});
