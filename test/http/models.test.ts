import { existsSync } from "node:fs";
import { rm, symlink } from "node:fs/promises";
import path from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

interface Health {
  status: string;
  backend: string;
  loaded: Array<{ id: string; active: number; queued: number; expiresAt: number | null }>;
}

async function health(server: TestServer): Promise<Health> {
  return (await (await fetch(`${server.url}/health`)).json()) as Health;
}

const hello = [{ role: "user" as const, content: "Hello" }];

describe("model listing", () => {
  let server: TestServer;
  let tiny: string;

  beforeAll(async () => {
    tiny = await testModelPath("tiny");
    server = await startTestServer({
      models: { tiny },
      manifest: { models: [{ file: "tiny.gguf", id: "tiny", aliases: ["gpt-4o-mini"] }] },
    });
  });
  afterAll(() => server?.close());

  it("lists installed models and their aliases", async () => {
    const page = await server.client.models.list();
    expect(page.data.map((model) => model.id).sort()).toEqual(["gpt-4o-mini", "tiny"]);
    for (const model of page.data) {
      expect(model.object).toBe("model");
      expect(model.owned_by).toBe("modelhost");
      expect(Number.isInteger(model.created)).toBe(true);
    }
  });

  it("retrieves one model, and answers 404 for an unknown one", async () => {
    expect(await server.client.models.retrieve("tiny")).toMatchObject({ id: "tiny", object: "model" });
    expect(await server.client.models.retrieve("gpt-4o-mini")).toMatchObject({ id: "gpt-4o-mini" });
    const error = await server.client.models.retrieve("missing").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it("chats through an alias, echoing the name the caller used", async () => {
    const reply = await server.client.chat.completions.create({ model: "gpt-4o-mini", messages: hello, max_tokens: 3 });
    expect(reply.model).toBe("gpt-4o-mini");
  });

  it("notices models added to and removed from the directory while running", async () => {
    const added = path.join(server.modelsDir, "copy-of-tiny.gguf");
    await symlink(tiny, added);
    expect((await server.client.models.list()).data.map((model) => model.id)).toContain("copy-of-tiny");
    const reply = await server.client.chat.completions.create({ model: "copy-of-tiny", messages: hello, max_tokens: 2 });
    expect(reply.usage?.completion_tokens).toBe(2);
    await rm(added);
    expect((await server.client.models.list()).data.map((model) => model.id)).not.toContain("copy-of-tiny");
  });

  it("reports readiness, the backend and loaded models on /health", async () => {
    const status = await health(server);
    expect(status.status).toBe("ok");
    expect(["native", "prebuilt"]).toContain(status.backend);
    expect(status.loaded.map((model) => model.id)).toContain("tiny");
  });

  it("answers CORS preflights for local origins only", async () => {
    const preflight = (origin: string) =>
      fetch(`${server.url}/v1/chat/completions`, {
        method: "OPTIONS",
        headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "content-type,authorization" },
      });
    const local = await preflight("http://localhost:5173");
    expect(local.status).toBe(204);
    expect(local.headers.get("access-control-allow-origin")).toBe("http://localhost:5173");
    const foreign = await preflight("https://evil.example");
    expect(foreign.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("model residency", () => {
  let server: TestServer;

  beforeAll(async () => {
    const tiny = await testModelPath("tiny");
    server = await startTestServer({ models: { a: tiny, b: tiny }, config: { maxLoadedModels: 1, keepAlive: 300 } });
  });
  afterAll(() => server?.close());

  it("keeps at most --max-loaded-models resident, unloading the idle one", async () => {
    await server.client.chat.completions.create({ model: "a", messages: hello, max_tokens: 1 });
    expect((await health(server)).loaded.map((model) => model.id)).toEqual(["a"]);
    await server.client.chat.completions.create({ model: "b", messages: hello, max_tokens: 1 });
    expect((await health(server)).loaded.map((model) => model.id)).toEqual(["b"]);
  });

  it("unloads an idle model after --keep-alive", async () => {
    await server.client.chat.completions.create({ model: "a", messages: hello, max_tokens: 1 });
    const [loaded] = (await health(server)).loaded;
    expect(loaded?.expiresAt).toBeGreaterThan(Date.now());
    await expect.poll(async () => (await health(server)).loaded, { timeout: 5000 }).toEqual([]);
    // And it loads again on demand.
    const reply = await server.client.chat.completions.create({ model: "a", messages: hello, max_tokens: 1 });
    expect(reply.usage?.completion_tokens).toBe(1);
  });
});

// A GGUF we did not write (real Llama 2 vocabulary, no chat template) proves we load third-party
// files. It lives in the workplace's shared folder, which a clone elsewhere does not have.
const sharedModel = path.resolve(import.meta.dirname, "../../../shared/models/llama-2-tiny-random.gguf");

describe.skipIf(!existsSync(sharedModel))("a third-party GGUF (llama-2-tiny-random)", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ models: { "llama-2-tiny-random": sharedModel } });
  });
  afterAll(() => server?.close());

  it("is listed and answers chats, plain and streamed alike, with the fallback template", async () => {
    const request = { model: "llama-2-tiny-random", messages: hello, max_tokens: 12, temperature: 0 };
    const plain = await server.client.chat.completions.create(request);
    expect(plain.usage?.completion_tokens).toBeGreaterThan(0);
    let streamed = "";
    for await (const chunk of await server.client.chat.completions.create({ ...request, stream: true })) {
      streamed += chunk.choices[0]?.delta.content ?? "";
    }
    expect(streamed).toBe(plain.choices[0]?.message.content);
    expect((await server.client.models.list()).data.map((model) => model.id)).toEqual(["llama-2-tiny-random"]);
  });
});
