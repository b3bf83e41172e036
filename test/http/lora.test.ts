import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Ollama } from "ollama";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loraAdapterWriter } from "../../src/testmodels/loraAdapterWriter.js";
import { presets } from "../../src/testmodels/presets.js";
import type { LlamaPreset } from "../../src/testmodels/presets.js";
import { TINY_ADAPTERS, writeTinyAdapters } from "../support/tinyAdapters.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

/**
 * Issue 35: LoRA adapters declared over a model in models.json, each served as `base+name`, and
 * llama-server's per-request `lora` field; tiny random adapters for the tiny model. The same
 * replies through llama-server with the same files are checked in test/engine/lora.test.ts.
 */
type Lora = Array<{ id: number; scale: number }>;

describe("LoRA adapters", () => {
  let dir: string;
  let server: TestServer;
  const warnings: string[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-lora-"));
    const file = (name: string) => path.join(dir, name);
    const adapters = await writeTinyAdapters(dir);
    // Made for a model of another shape (script-tiny's hidden size is 128, tiny's 64).
    await loraAdapterWriter(presets["script-tiny"] as LlamaPreset, 3).write(file("lora-wrong.gguf"));
    // Cut short: its header promises tensors past the end of the file.
    const whole = await readFile(adapters["lora-a"]);
    await writeFile(file("lora-broken.gguf"), whole.subarray(0, Math.floor(whole.length / 2)));
    server = await startTestServer({
      models: {
        tiny: await testModelPath("tiny"),
        ...adapters,
        ...Object.fromEntries(["lora-wrong", "lora-broken"].map((name) => [name, file(`${name}.gguf`)])),
      },
      manifest: {
        models: [
          {
            file: "tiny.gguf",
            adapters: [...TINY_ADAPTERS, { file: "lora-wrong.gguf", name: "wrong" }, { file: "lora-broken.gguf", name: "broken" }],
          },
        ],
      },
      config: { parallel: 4, logLevel: "warn" },
      logDestination: { write: (line) => void warnings.push(line) },
    });
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const ask = async (model: string, lora?: Lora, content = "Tell me about rivers.") => {
    const completion = await server.client.chat.completions.create({
      model,
      messages: [{ role: "user", content }],
      max_tokens: 24,
      temperature: 0,
      ...(lora ? { lora } : {}),
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    return { text: completion.choices[0]!.message.content ?? "", cached: completion.usage?.prompt_tokens_details?.cached_tokens ?? 0 };
  };

  it("serves each adapter that can apply as a model of its own, in /v1/models and /api/tags; the adapter files are no models", async () => {
    const ids = (await server.client.models.list()).data.map((model) => model.id).sort();
    expect(ids).toEqual(["tiny", "tiny+a", "tiny+b", "tiny+wrong"]);
    const tags = (await new Ollama({ host: server.url }).list()).models.map((model) => model.name).sort();
    expect(tags).toEqual(["tiny+a:latest", "tiny+b:latest", "tiny+wrong:latest", "tiny:latest"].sort());
    // The cut file is not listed, and the log says why.
    expect(warnings.join("\n")).toMatch(/lora-broken\.gguf, which cannot apply: it is not a readable GGUF file/);
  });

  it("writes another reply with an adapter, another with each adapter, and the base's at scale 0", async () => {
    const base = (await ask("tiny")).text;
    const a = (await ask("tiny+a")).text;
    const b = (await ask("tiny+b")).text;
    expect(base.length).toBeGreaterThan(10);
    expect(a).not.toBe(base);
    expect(b).not.toBe(base);
    expect(b).not.toBe(a);
    // The `lora` field as llama-server takes it: the ids index the model's declared adapters.
    expect((await ask("tiny", [{ id: 0, scale: 0 }])).text).toBe(base);
    expect((await ask("tiny", [{ id: 0, scale: 1 }])).text).toBe(a);
    // tiny+b applies b at its declared scale, 0.5; the field's list replaces the name's.
    expect((await ask("tiny", [{ id: 1, scale: 0.5 }])).text).toBe(b);
    expect((await ask("tiny+b", [{ id: 1, scale: 1 }])).text).not.toBe(b);
    expect((await ask("tiny+a", [])).text).toBe(base);
    // Two at once are a third reply.
    const both = (
      await ask("tiny", [
        { id: 0, scale: 1 },
        { id: 1, scale: 0.5 },
      ])
    ).text;
    expect([base, a, b]).not.toContain(both);
  });

  it("decodes requests of different adapters together, each as it would alone", async () => {
    const models = ["tiny", "tiny+a", "tiny+b", "tiny+a"];
    const alone = [];
    for (const model of models) alone.push((await ask(model, undefined, `Rivers ${model}`)).text);
    const together = await Promise.all(
      models.map(async (model) => {
        const stream = await server.client.chat.completions.create({
          model,
          messages: [{ role: "user", content: `Rivers ${model}` }],
          max_tokens: 24,
          temperature: 0,
          stream: true,
        });
        let text = "";
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
        return text;
      }),
    );
    expect(together).toEqual(alone);
  });

  it("reuses a prompt's cache only for the same adapters", async () => {
    const content = "A conversation about the sea, long enough to be worth a cache of its own.";
    await ask("tiny+a", undefined, content);
    expect((await ask("tiny+a", undefined, content)).cached).toBeGreaterThan(15);
    // The same adapter at another scale is another set, which no sequence has read anything with.
    expect((await ask("tiny", [{ id: 0, scale: 0.25 }], content)).cached).toBe(0);
  });

  it("takes the lora field on legacy completions too", async () => {
    const complete = async (model: string, lora?: Lora) =>
      (
        await server.client.completions.create({
          model,
          prompt: "Once upon a time",
          max_tokens: 16,
          temperature: 0,
          ...(lora ? { lora } : {}),
        } as OpenAI.CompletionCreateParamsNonStreaming)
      ).choices[0]!.text;
    const a = await complete("tiny+a");
    expect(a).not.toBe(await complete("tiny"));
    expect(await complete("tiny", [{ id: 0, scale: 1 }])).toBe(a);
  });

  it("refuses an adapter made for another model, a file that is no adapter, and an id the model has not, saying why", async () => {
    const wrong = await postJson(`${server.url}/v1/chat/completions`, {
      model: "tiny+wrong",
      messages: [{ role: "user", content: "Hi" }],
    });
    expect(wrong.status).toBe(500);
    expect(JSON.stringify(await wrong.json())).toMatch(
      /lora-wrong\.gguf cannot be applied to `tiny`: its blk\.0\.attn_q\.weight matrices .* do not fit the model's .*another base model/,
    );
    const broken = await postJson(`${server.url}/v1/chat/completions`, {
      model: "tiny",
      messages: [{ role: "user", content: "Hi" }],
      lora: [{ id: 3, scale: 1 }],
    });
    expect(broken.status).toBe(500);
    expect(JSON.stringify(await broken.json())).toMatch(/lora-broken\.gguf cannot be applied to `tiny`: it is not a readable GGUF file/);
    const unknown = await postJson(`${server.url}/v1/chat/completions`, {
      model: "tiny",
      messages: [{ role: "user", content: "Hi" }],
      lora: [{ id: 9, scale: 1 }],
    });
    expect(unknown.status).toBe(400);
    const body = (await unknown.json()) as { error: { param: string; message: string } };
    expect(body.error.param).toBe("lora.0.id");
    expect(body.error.message).toMatch(/no LoRA adapter of id 9: its ids are 0 to 3 \(0: a, 1: b, 2: wrong, 3: broken\)/);
    const malformed = await postJson(`${server.url}/v1/chat/completions`, {
      model: "tiny",
      messages: [{ role: "user", content: "Hi" }],
      lora: [{ id: "a" }],
    });
    expect(malformed.status).toBe(400);
    // The server still serves after each refusal.
    expect((await ask("tiny+a")).text.length).toBeGreaterThan(0);
  });
});
