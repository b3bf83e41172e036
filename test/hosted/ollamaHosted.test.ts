import { Ollama } from "ollama";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeEngine } from "../support/fakeEngine.js";
import { openHosted, type Hosted } from "../support/hostedServer.js";
import type { TestServer } from "../support/startTestServer.js";

// The hosted profile serves the native API behind the same tokens, limits and usage ledger as
// /v1; managing models is left to the operator's CLI. The gate's work, not the model's: a fake engine.
describe("native API in the hosted profile", () => {
  let hosted: Hosted;
  let server: TestServer;
  let token: string;
  let ollama: Ollama;

  beforeAll(async () => {
    hosted = await openHosted();
    token = (await hosted.newAccount("free", { name: "ada" })).token;
    server = await hosted.serve({ engine: new FakeEngine({ models: ["tiny"], reply: { text: "word ".repeat(50) } }) });
    ollama = new Ollama({ host: server.url, headers: { Authorization: `Bearer ${token}` } });
  });
  afterAll(async () => {
    await hosted?.close();
  });

  it("requires a token, answering 401 in the native shape", async () => {
    const anonymous = new Ollama({ host: server.url });
    await expect(anonymous.list()).rejects.toMatchObject({ status_code: 401, error: expect.stringMatching(/API key|token/) });
    await expect(anonymous.chat({ model: "tiny", messages: [{ role: "user", content: "hi" }] })).rejects.toMatchObject({
      status_code: 401,
    });
    const response = await fetch(`${server.url}/api/version`);
    expect(response.status).toBe(401);
    expect(Object.keys((await response.json()) as object)).toEqual(["error"]);
    // The liveness probe stays public.
    expect((await fetch(server.url)).status).toBe(200);
  });

  it("serves a token's requests within its limits and records them in the usage ledger", async () => {
    const reply = await ollama.chat({ model: "tiny", messages: [{ role: "user", content: "hi" }], options: { num_predict: 5 } });
    expect(reply.eval_count).toBe(5);
    const streamed = await fetch(`${server.url}/api/generate`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}` },
      body: JSON.stringify({ model: "tiny", prompt: "hi", options: { num_predict: 3 } }),
    });
    expect(streamed.headers.get("x-ratelimit-limit-requests")).toBe("15");
    await streamed.text();
    expect((await ollama.embed({ model: "tiny", input: "hi" })).embeddings).toHaveLength(1);
    expect((await ollama.list()).models.map((model) => model.name)).toEqual(["tiny:latest"]);

    // The ledger is written by group commit within milliseconds; wait for it, boundedly.
    let usage: { data: Array<{ requests: number; completion_tokens: number }> } = { data: [] };
    for (let attempt = 0; attempt < 50 && (usage.data[0]?.requests ?? 0) < 3; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      usage = (await (await fetch(`${server.url}/v1/usage`, { headers: { Authorization: `Bearer ${token}` } })).json()) as typeof usage;
    }
    expect(usage.data[0]).toMatchObject({ requests: 3, completion_tokens: 8 });
  });

  it("leaves model residency to the operator: a token's keep_alive is ignored", async () => {
    await ollama.chat({ model: "tiny", messages: [], keep_alive: 0 });
    expect((await ollama.ps()).models.map((model) => model.name)).toEqual(["tiny:latest"]);
    await ollama.generate({ model: "tiny", prompt: "hi", options: { num_predict: 1 }, keep_alive: 0 });
    expect((await ollama.ps()).models.map((model) => model.name)).toEqual(["tiny:latest"]);
  });

  it("refuses model management to tokens with 403", async () => {
    await expect(ollama.copy({ source: "tiny", destination: "other" })).rejects.toMatchObject({
      status_code: 403,
      error: expect.stringMatching(/operator/),
    });
    await expect(ollama.delete({ model: "tiny" })).rejects.toMatchObject({ status_code: 403 });
    await expect(ollama.create({ model: "new", from: "tiny" })).rejects.toMatchObject({ status_code: 403 });
    expect((await ollama.list()).models.map((model) => model.name)).toEqual(["tiny:latest"]);
  });
});
