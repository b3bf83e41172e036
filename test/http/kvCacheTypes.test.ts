import { execFile } from "node:child_process";
import { mkdtemp, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KvCacheStatus, KvCacheType } from "../../src/core/KvCacheType.js";
import { makeTestModel } from "../../src/testmodels/makeTestModel.js";
import { scriptText, scriptTokens } from "../../src/testmodels/scriptTokens.js";
import { postJson, startTestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

const PROMPT = "The colour of the sky?";
const REPLY = scriptTokens("Blue.");

let dir: string;
/** script-tiny (heads of 64 values, which every quantized type divides), writing REPLY after PROMPT under greedy decoding. */
let scripted: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-kv-"));
  scripted = (
    await makeTestModel({
      preset: "script-tiny",
      out: path.join(dir, "scripted.gguf"),
      script: { tokens: [scriptTokens(PROMPT).at(-1)!, ...REPLY] },
    })
  ).path;
}, 60_000);
afterAll(() => rm(dir, { recursive: true, force: true }));

interface Health {
  loaded: Array<{ id: string; kvCache?: KvCacheStatus }>;
}

/** Serves the scripted model with a cache type for keys and values; its reply, and what /health and /api/ps then report. */
async function generateWith(type: KvCacheType) {
  const server = await startTestServer({ models: { scripted }, config: { cacheTypeK: type, cacheTypeV: type } });
  try {
    const completion = await server.client.completions.create({
      model: "scripted",
      prompt: PROMPT,
      max_tokens: REPLY.length,
      temperature: 0,
    });
    const health = (await (await fetch(`${server.url}/health`)).json()) as Health;
    const ps = (await (await fetch(`${server.url}/api/ps`)).json()) as { models: Array<{ size: number }> };
    return { text: completion.choices[0]!.text, kvCache: health.loaded[0]!.kvCache!, psSize: ps.models[0]!.size };
  } finally {
    await server.close();
  }
}

describe("--cache-type-k and --cache-type-v", () => {
  it("generate with a q8_0 and a q4_0 KV cache, whose contexts llama.cpp allocates smaller than f16's", async () => {
    const f16 = await generateWith("f16");
    const q8 = await generateWith("q8_0");
    const q4 = await generateWith("q4_0");
    // The script's margins (scriptWiring.ts) are far above the quantization's error: the same reply.
    for (const run of [f16, q8, q4]) expect(run.text).toBe(scriptText(REPLY));
    expect(f16.kvCache).toMatchObject({ typeK: "f16", typeV: "f16" });
    expect(q8.kvCache).toMatchObject({ typeK: "q8_0", typeV: "q8_0" });
    expect(q4.kvCache).toMatchObject({ typeK: "q4_0", typeV: "q4_0" });
    expect(q8.kvCache.contextBytes).toBeLessThan(f16.kvCache.contextBytes);
    expect(q4.kvCache.contextBytes).toBeLessThan(q8.kvCache.contextBytes);
    // /api/ps counts the context with the weights, as Ollama's does.
    const weights = (await stat(scripted)).size;
    expect([f16.psSize, q8.psSize, q4.psSize]).toEqual([f16, q8, q4].map((run) => weights + run.kvCache.contextBytes));
  });

  it("refuses, naming the setting, a type whose blocks a model's heads cannot hold", async () => {
    // tiny's heads have 16 values; q8_0 stores blocks of 32.
    const server = await startTestServer({
      models: { tiny: await testModelPath("tiny") },
      config: { cacheTypeK: "q8_0", cacheTypeV: "f16" },
    });
    try {
      const response = await postJson(`${server.url}/v1/chat/completions`, {
        model: "tiny",
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 1,
      });
      expect(response.status).toBe(500);
      const { error } = (await response.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe("model_load_failed");
      expect(error.message).toContain("--cache-type-k");
      expect(error.message).toContain("16 values");
    } finally {
      await server.close();
    }
  });

  it("refuses an unknown type at startup, naming the flag or variable", async () => {
    const bin = path.resolve(import.meta.dirname, "../../bin/modelhost.cjs");
    const serve = (args: string[], env: NodeJS.ProcessEnv = {}) =>
      promisify(execFile)(process.execPath, [bin, "serve", "--port", "0", "--models-dir", dir, ...args], {
        env: { ...process.env, ...env },
      }).then(
        () => ({ code: 0, stderr: "" }),
        (error: { code: number; stderr: string }) => error,
      );
    const flag = await serve(["--cache-type-k", "q3_k"]);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("--cache-type-k");
    const variable = await serve([], { MODELHOST_CACHE_TYPE_V: "int8" });
    expect(variable.code).toBe(2);
    expect(variable.stderr).toContain("MODELHOST_CACHE_TYPE_V");
  });
});
