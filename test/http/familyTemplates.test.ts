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
  gemma2: "google-gemma-2-2b-it.jinja",
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
});
