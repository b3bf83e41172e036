import { writeFile, readFile } from "node:fs/promises";
import path from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

const messages = [{ role: "user", content: "Hi" }];

interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

describe("errors", () => {
  let server: TestServer;
  let url: string;

  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { bodyLimit: 64 * 1024, contextSize: 256 } });
    url = `${server.url}/v1/chat/completions`;
  });
  afterAll(() => server?.close());

  async function expectError(response: Response, status: number, param: string | null, code: string | null): Promise<ErrorBody> {
    expect(response.status).toBe(status);
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    const body = (await response.json()) as ErrorBody;
    expect(Object.keys(body)).toEqual(["error"]);
    expect(Object.keys(body.error).sort()).toEqual(["code", "message", "param", "type"]);
    expect(body.error.param).toBe(param);
    expect(body.error.code).toBe(code);
    expect(body.error.message.length).toBeGreaterThan(0);
    expect(body.error.type).toBe(status >= 500 ? "server_error" : "invalid_request_error");
    return body;
  }

  it("refuses malformed JSON", async () => {
    await expectError(await postJson(url, '{"model": "tiny",'), 400, null, "invalid_json");
    await expectError(await postJson(url, ""), 400, null, "invalid_json");
  });

  it("parses a JSON body sent without a JSON content type", async () => {
    const response = await fetch(url, { method: "POST", body: JSON.stringify({ model: "tiny", messages, max_tokens: 1 }) });
    expect(response.status).toBe(200);
  });

  it.each([
    [{ messages }, "model"],
    [{ model: "tiny" }, "messages"],
    [{ model: "tiny", messages: "hello" }, "messages"],
    [{ model: "tiny", messages: [{ role: "user" }] }, "messages[0].content"],
    [{ model: "tiny", messages, temperature: 2.5 }, "temperature"],
    [{ model: "tiny", messages, max_tokens: -1 }, "max_tokens"],
    [{ model: "tiny", messages, stop: ["a", "b", "c", "d", "e"] }, "stop"],
    [{ model: "tiny", messages, n: 9 }, "n"],
    [{ model: "tiny", messages: [...messages, { role: "tool", tool_call_id: "call_x", content: "{}" }] }, "messages[1].tool_call_id"],
  ])("answers 400 naming the param for %j", async (body, param) => {
    await expectError(await postJson(url, body), 400, param, null);
  });

  it("answers 404 model_not_found through the official client", async () => {
    const error = await server.client.chat.completions
      .create({ model: "nope", messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect((error as InstanceType<typeof OpenAI.NotFoundError>).code).toBe("model_not_found");
    expect((error as Error).message).toContain("The model `nope` does not exist");
    // Also when the translator would refuse the rest (an image part, a tool result answering nothing).
    for (const body of [
      { model: "nope", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://x/y.png" } }] }] },
      { model: "nope", messages: [...messages, { role: "tool", tool_call_id: "call_x", content: "{}" }] },
    ]) {
      await expectError(await postJson(url, body), 404, "model", "model_not_found");
    }
  });

  it("answers 413 for a body over the limit", async () => {
    const huge = { model: "tiny", messages: [{ role: "user", content: "x".repeat(100 * 1024) }] };
    await expectError(await postJson(url, huge), 413, null, "request_too_large");
  });

  it("answers 400 context_length_exceeded when the prompt does not fit", async () => {
    const long = { model: "tiny", messages: [{ role: "user", content: "word ".repeat(2000) }] };
    const body = await expectError(await postJson(url, long), 400, "messages", "context_length_exceeded");
    expect(body.error.message).toMatch(/maximum context length is 256 tokens/);
  });

  it("answers 404 in the same shape for an unknown URL", async () => {
    await expectError(await fetch(`${server.url}/v1/nothing-here`), 404, null, "not_found");
  });

  it("answers 500 without internals when a model file cannot be loaded", async () => {
    // A sound GGUF file of an architecture llama.cpp does not know ("llama" spelled "llamx", the
    // same length, so every offset stays right): listed, yet unloadable. A cut-off file would not
    // even be listed (GgufReader refuses it).
    const whole = await readFile(await testModelPath("tiny"));
    const architecture = whole.indexOf(Buffer.from("general.architecture"));
    const value = whole.indexOf(Buffer.from("llama"), architecture + "general.architecture".length);
    expect(value - architecture).toBe("general.architecture".length + 4 + 8);
    whole.write("llamx", value, "latin1");
    const broken = path.join(server.modelsDir, "broken.gguf");
    await writeFile(broken, whole);
    const body = await expectError(await postJson(url, { model: "broken", messages }), 500, null, "model_load_failed");
    expect(body.error.message).not.toContain(server.modelsDir);
    expect(body.error.message).not.toMatch(/\bat\s.+:\d+/);
  });

  it("still serves after all of that", async () => {
    const reply = await server.client.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 3,
    });
    expect(reply.choices[0]?.message.content).toBeTypeOf("string");
    const health = (await (await fetch(`${server.url}/health`)).json()) as { loaded: Array<{ active: number; queued: number }> };
    expect(health.loaded.every((model) => model.active === 0 && model.queued === 0)).toBe(true);
  });
});
