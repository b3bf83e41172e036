import { readdir, readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Ollama, type ProgressResponse } from "ollama";
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { sha256, startFakeHub, type FakeHub } from "../support/fakeHub.js";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

// POST /api/pull as the official `ollama` client drives it, against the real server pulling from a
// loopback stand-in for the Hugging Face hub.

describe("POST /api/pull with the ollama client", () => {
  let hub: FakeHub;
  let server: TestServer;
  let ollama: Ollama;
  let model: Buffer;

  beforeAll(async () => {
    model = await readFile(await testModelPath("tiny"));
    hub = await startFakeHub({
      "test/Tiny-GGUF": [{ path: "Tiny-Q4_K_M.gguf", content: model }],
      "test/Corrupt-GGUF": [{ path: "Corrupt-Q8_0.gguf", content: model, corruptWith: Buffer.alloc(model.length) }],
    });
    server = await startTestServer({ models: {}, config: { hfEndpoint: hub.url, contextSize: 256 } });
    ollama = new Ollama({ host: server.url });
  });

  afterAll(async () => {
    await server?.close();
    await hub?.close();
  });

  it("streams Ollama's progress, ending with success, and the model is served at once", async () => {
    const parts: ProgressResponse[] = [];
    for await (const part of await ollama.pull({ model: "hf.co/test/Tiny-GGUF:Q4_K_M", stream: true })) parts.push(part);

    const digest = `sha256:${sha256(model)}`;
    expect(parts[0]).toEqual({ status: "pulling manifest" });
    const layer = parts.filter((part) => part.digest === digest);
    expect(layer.length).toBeGreaterThan(0);
    for (const part of layer) expect(part).toMatchObject({ status: `pulling ${sha256(model).slice(0, 12)}`, total: model.length });
    expect(layer.at(-1)?.completed).toBe(model.length);
    expect(parts.slice(-3).map((part) => part.status)).toEqual(["verifying sha256 digest", "writing manifest", "success"]);

    const { models } = await ollama.list();
    expect(models.map((entry) => entry.name)).toEqual(["hf.co/test/Tiny-GGUF:Q4_K_M"]);
    expect(models[0]?.digest).toBe(sha256(model));
    const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "local", maxRetries: 0 });
    const reply = await openai.chat.completions.create({
      model: "hf.co/test/Tiny-GGUF:Q4_K_M",
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 4,
    });
    expect(reply.choices[0]?.message.content?.length).toBeGreaterThan(0);
  });

  it("answers one object with stream: false, and fetches nothing for a model it has", async () => {
    const before = hub.bytesServed();
    await expect(ollama.pull({ model: "hf.co/test/Tiny-GGUF:Q4_K_M", stream: false })).resolves.toEqual({ status: "success" });
    expect(hub.bytesServed()).toBe(before);
  });

  it("gives an unknown quantization a 404 that lists what the repository has", async () => {
    await expect(
      ollama.pull({ model: "hf.co/test/Tiny-GGUF:Q8_0", stream: true }).then(async (stream) => {
        for await (const part of stream) void part;
      }),
    ).rejects.toMatchObject({
      status_code: 404,
      error: 'The repository test/Tiny-GGUF has no file in quantization "Q8_0". Available: Q4_K_M (e.g. hf.co/test/Tiny-GGUF:Q4_K_M).',
    });
    await expect(ollama.pull({ model: "no such thing", stream: false })).rejects.toMatchObject({ status_code: 400 });
  });

  it("ends the stream with an error line when the download proves corrupt, and installs nothing", async () => {
    const response = await fetch(`${server.url}/api/pull`, {
      method: "POST",
      body: JSON.stringify({ model: "hf.co/test/Corrupt-GGUF:Q8_0" }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
    const lines = (await response.text())
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines[0]).toEqual({ status: "pulling manifest" });
    expect(lines.at(-1)?.error).toMatch(/^The SHA-256 of .* is [0-9a-f]{64}, not the [0-9a-f]{64} the server publishes/);
    expect((await readdir(server.modelsDir)).filter((name) => name.includes("Corrupt"))).toEqual([]);
    // The ollama client throws on such a line, as it does against Ollama.
    await expect(
      ollama.pull({ model: "hf.co/test/Corrupt-GGUF:Q8_0", stream: true }).then(async (stream) => {
        for await (const part of stream) void part;
      }),
    ).rejects.toThrow(/SHA-256/);
  });
});

describe("POST /api/pull of a plain http:// URL", () => {
  let model: Buffer;
  /** A plain http server standing for any address on the network; it counts what reaches it. */
  let plain: Server;
  let plainUrl: string;
  const requests: string[] = [];

  beforeAll(async () => {
    model = await readFile(await testModelPath("tiny"));
    plain = createServer((request, response) => {
      requests.push(request.url ?? "");
      response.writeHead(200, { "content-length": model.length }).end(model);
    });
    await new Promise<void>((resolve) => plain.listen(0, "127.0.0.1", resolve));
    plainUrl = `http://127.0.0.1:${(plain.address() as AddressInfo).port}`;
  });

  afterAll(() => new Promise((resolve) => plain?.close(resolve)));

  beforeEach(() => {
    requests.length = 0;
  });

  it("is refused by default with a 400 in Ollama's shape, no request made and no file written", async () => {
    // The default hub (https://huggingface.co) is never contacted for a URL.
    const server = await startTestServer({ models: {}, config: { contextSize: 256 } });
    try {
      for (const stream of [true, false]) {
        const response = await fetch(`${server.url}/api/pull`, {
          method: "POST",
          body: JSON.stringify({ model: `${plainUrl}/any.gguf`, stream }),
        });
        expect(response.status).toBe(400);
        const body = (await response.json()) as { error: string };
        expect(Object.keys(body)).toEqual(["error"]);
        expect(body.error).toContain("models are pulled over https only");
        expect(body.error).toContain("--allow-http-pull true (MODELHOST_ALLOW_HTTP_PULL=true)");
      }
      expect(requests).toEqual([]);
      expect(await readdir(server.modelsDir)).toEqual([]);
    } finally {
      await server.close();
    }
  });

  it("is pulled when the operator allows plain http", async () => {
    const server = await startTestServer({ models: {}, config: { contextSize: 256, allowHttpPull: true } });
    try {
      const response = await fetch(`${server.url}/api/pull`, {
        method: "POST",
        body: JSON.stringify({ model: `${plainUrl}/any.gguf`, stream: false }),
      });
      expect(await response.json()).toEqual({ status: "success" });
      expect(requests).toEqual(["/any.gguf"]);
      expect((await readdir(server.modelsDir)).sort()).toEqual(["any.gguf", "models.json"]);
    } finally {
      await server.close();
    }
  });
});
