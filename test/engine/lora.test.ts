import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engineBuildTools, needs } from "../support/debianPackages.js";
import { buildLlamaCpp } from "../support/llamaCppBuild.js";
import { startLlamaServerProcess, type LlamaServerProcess } from "../support/llamaServerProcess.js";
import { ensureNativeEngine } from "../support/nativeEngine.js";
import { TINY_ADAPTERS, writeTinyAdapters } from "../support/tinyAdapters.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

/**
 * Issue 35: LoRA adapters against llama-server built from the same llama.cpp source, on the same
 * files: the tiny model with two tiny random adapters, applied through each server's per-request
 * `lora` field and through modelhost's `base+name` models. At temperature 0 the replies are the
 * same. Without cmake, g++, make or git the file skips (fails under CI).
 */
interface Completion {
  usage: { prompt_tokens: number; completion_tokens: number };
  choices: Array<{ message: { content: string } }>;
}

describe.skipIf(!needs(...engineBuildTools))("LoRA adapters against llama-server (native engine)", () => {
  let dir: string;
  let server: TestServer;
  let llamaServer: LlamaServerProcess;

  beforeAll(async () => {
    await ensureNativeEngine();
    const llamaServerBin = path.join(await buildLlamaCpp(["llama-server"]), "llama-server");
    dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-lora-"));
    const adapters = await writeTinyAdapters(dir);
    const tiny = await testModelPath("tiny");
    server = await startTestServer({
      models: { tiny, ...adapters },
      manifest: { models: [{ file: "tiny.gguf", adapters: TINY_ADAPTERS }] },
      config: { engine: "native", threads: 2, parallel: 2 },
    });
    // The same adapters in the same order, so the same ids; loaded at scale 0 until a request sets one.
    llamaServer = await startLlamaServerProcess(llamaServerBin, [
      ...["-m", tiny, "--lora", adapters["lora-a"], "--lora", adapters["lora-b"], "--lora-init-without-apply"],
      ...["-t", "2", "-c", "2048", "-np", "1", "--no-warmup"],
    ]);
  }, 40 * 60_000);
  afterAll(async () => {
    await llamaServer?.stop();
    await server?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const body = (model: string, lora?: Array<{ id: number; scale: number }>) => ({
    model,
    messages: [{ role: "user", content: "Write about the mountains and the sea." }],
    max_tokens: 32,
    temperature: 0,
    ...(lora ? { lora } : {}),
  });
  const reply = async (url: string, request: object) => {
    const response = await postJson(`${url}/v1/chat/completions`, request);
    expect(response.status, llamaServer.log().slice(-2000)).toBe(200);
    const completion = (await response.json()) as Completion;
    // The same tokens: llama-server ends a reply cut inside a character (random weights write byte
    // tokens) with U+FFFD, where modelhost gives out whole characters only.
    return { text: completion.choices[0]!.message.content.replace(/\uFFFD+$/, ""), tokens: completion.usage.completion_tokens };
  };

  // llama-server applies its adapters at their command-line scale (1) to a request without the
  // field, even with --lora-init-without-apply, so "none" is said to it with scales of 0.
  const none = [
    { id: 0, scale: 0 },
    { id: 1, scale: 0 },
  ];
  it.each([
    ["no adapter", "tiny", none],
    ["adapter a at scale 1", "tiny+a", [{ id: 0, scale: 1 }]],
    ["adapter b at scale 0.5", "tiny+b", [{ id: 1, scale: 0.5 }]],
    [
      "both adapters",
      undefined,
      [
        { id: 0, scale: 1 },
        { id: 1, scale: 0.5 },
      ],
    ],
    [
      "adapter a at scale 0",
      undefined,
      [
        { id: 0, scale: 0 },
        { id: 1, scale: 0 },
      ],
    ],
  ] as const)("writes llama-server's reply at temperature 0 with %s", async (_what, name, lora) => {
    const theirs = await reply(llamaServer.url, body("tiny", [...lora]));
    expect(theirs.tokens).toBe(32);
    expect(await reply(server.url, body("tiny", [...lora]))).toEqual(theirs);
    // The adapters a model name applies, without the field.
    if (name !== undefined) expect(await reply(server.url, body(name))).toEqual(theirs);
  });

  it("gives different replies for the base and each adapter (so the comparisons above compare something)", async () => {
    const texts = await Promise.all(["tiny", "tiny+a", "tiny+b"].map(async (model) => (await reply(server.url, body(model))).text));
    expect(new Set(texts).size).toBe(3);
  });
});
