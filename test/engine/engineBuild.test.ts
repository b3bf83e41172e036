import { execFile } from "node:child_process";
import { mkdtemp, readFile, readdir, rm, symlink } from "node:fs/promises";
import { readFileSync, readdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nativeContextOf, nativeSteps, type NativeGenerate, type NativeSteps } from "../../src/engine/llamaInternals.js";
import { loadLlama } from "../../src/engine/loadLlama.js";
import {
  llamaDir,
  MULTIMODAL_EVALUATE,
  MULTIMODAL_FREE,
  MULTIMODAL_LOAD,
  MULTIMODAL_TOKENIZE,
} from "../../src/engine/native/addonPatch.js";
import { projectorWriter, TINY_PROJECTORS } from "../../src/testmodels/projectorWriter.js";
import { engineBuildTools, needs } from "../support/debianPackages.js";
import { startTestServer } from "../support/startTestServer.js";
import { ensureNativeEngine, nativeEngineBuilt } from "../support/nativeEngine.js";
import { encodePng } from "../support/images.js";
import { testModelPath } from "../support/testModels.js";
import { generateNatively, GREEDY } from "./generateNatively.js";

const run = promisify(execFile);
const bin = path.resolve(import.meta.dirname, "../../bin/modelhost.cjs");

/**
 * `modelhost engine build` compiles llama.cpp from the source bundled in node-llama-cpp, offline,
 * then the server runs on it. The build takes minutes and holds node-llama-cpp's lock on its build
 * folder, which makes any other process loading llama.cpp meanwhile wait: `npm test` runs this file
 * on its own, after the others (`npm run test:engine`). On a machine where a native build already
 * exists (a developer's checkout), it is not rebuilt: the rest of the file still proves it loads.
 * Without one, and without the build tools, the file skips (fails under CI).
 */
const built = await nativeEngineBuilt();

describe.skipIf(!built && !needs(...engineBuildTools))("the native engine", () => {
  let modelsDir: string;

  beforeAll(async () => {
    modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-engine-"));
    await symlink(await testModelPath("tiny"), path.join(modelsDir, "tiny.gguf"));
  });
  afterAll(() => rm(modelsDir, { recursive: true, force: true }));

  it("builds offline from the bundled source, unless already built", { timeout: 40 * 60_000 }, async () => {
    if (built) return;
    // Built here, or by another file of test/engine that needed it first (test/support/nativeEngine.ts).
    const build = await ensureNativeEngine();
    if (build.built) expect(build.stdout).toMatch(/Built llama\.cpp for this machine in \d+ s, with modelhost's native decode steps\./);
    // node-llama-cpp's own sources are as it ships them again.
    const addonDir = path.join(llamaDir(), "addon");
    expect(await readFile(path.join(addonDir, "addon.cpp"), "utf8")).not.toMatch(/modelhost/);
    expect(await readFile(path.join(addonDir, "AddonContext.cpp"), "utf8")).not.toMatch(/modelhost/);
    expect(await readFile(path.join(llamaDir(), "CMakeLists.txt"), "utf8")).not.toMatch(/mtmd|MTMD/);
    expect((await readdir(addonDir)).filter((file) => /modelhost/i.test(file))).toEqual([]);
  });

  it("is what `engine status` reports and what --engine native loads", async () => {
    const { stdout } = await run(process.execPath, [bin, "engine", "status", "--engine", "native"]);
    expect(stdout).toMatch(/^backend: native$/m);
    expect(stdout).toMatch(/^decode step: native loop \(decode and sample in one task, steps without the event loop\)$/m);
    expect(stdout).toMatch(/^images: yes /m);
    expect(stdout).toMatch(/OPENMP = 1/);
  });

  it("serves chats, sampling in its native step what node-llama-cpp's own calls sample on the prebuilt binary", async () => {
    const request = (model: string) => ({
      model,
      messages: [{ role: "user" as const, content: "Tell me about the sea." }],
      max_tokens: 48,
      temperature: 0.9,
      seed: 42,
      presence_penalty: 0.5,
    });
    const answers: string[] = [];
    for (const engine of ["native", "prebuilt"] as const) {
      const server = await startTestServer({ models: { tiny: path.join(modelsDir, "tiny.gguf") }, config: { engine } });
      try {
        const health = (await (await fetch(`${server.url}/health`)).json()) as { backend: string };
        expect(health.backend).toBe(engine);
        const reply = await server.client.chat.completions.create(request("tiny"));
        expect(reply.usage?.completion_tokens).toBe(48);
        answers.push(reply.choices[0]!.message.content!);
      } finally {
        await server.close();
      }
    }
    expect(answers[0]).toBe(answers[1]);
  });
  it("decodes chats, embeddings and ranking on one thread of its own, so OpenMP keeps one team", async () => {
    // This process's threads: name and CPU time (ns) by id.
    const threads = () =>
      new Map(
        readdirSync("/proc/self/task").map((id) => {
          const name = readFileSync(`/proc/self/task/${id}/comm`, "utf8").trim();
          return [id, { name, cpuNs: Number(readFileSync(`/proc/self/task/${id}/schedstat`, "utf8").split(" ")[0]) }] as const;
        }),
      );
    const server = await startTestServer({
      models: {
        tiny: path.join(modelsDir, "tiny.gguf"),
        embed: await testModelPath("embed-tiny"),
        rerank: await testModelPath("rerank-tiny"),
      },
      config: { engine: "native", threads: 2 },
    });
    const post = (route: string, body: unknown) =>
      fetch(`${server.url}${route}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const embed = async () =>
      expect((await server.client.embeddings.create({ model: "embed", input: ["the sea", "a lighthouse keeper"] })).data).toHaveLength(2);
    const everything = async () => {
      await server.client.chat.completions.create({
        model: "tiny",
        messages: [{ role: "user", content: "Tell me about the sea." }],
        max_tokens: 24,
      });
      await embed();
      expect((await post("/v1/rerank", { model: "rerank", query: "lighthouse", documents: ["a lighthouse keeper", "soup"] })).status).toBe(
        200,
      );
    };
    try {
      await everything();
      const before = threads();
      // The decode thread and the one worker of its OpenMP team, which took its name.
      const decoding = [...before].filter(([, thread]) => thread.name === "llama decode");
      expect(decoding).toHaveLength(2);
      const decodingNs = (all: ReturnType<typeof threads>) => decoding.reduce((sum, [id]) => sum + all.get(id)!.cpuNs, 0);
      // node-llama-cpp's own decode (embeddings here) runs there too, through the build's patch.
      const decodedBefore = decodingNs(before);
      await embed();
      expect(decodingNs(threads())).toBeGreaterThan(decodedBefore);
      // Were the libuv pool threads decoding, each would have started an OpenMP team of its own
      // (a thread more each, with --threads 2) as the requests landed on them.
      for (let round = 0; round < 4; round++) await everything();
      expect(threads().size).toBe(before.size);
    } finally {
      await server.close();
    }
  });

  it("generates in the native loop, many steps a call, the tokens one step a task gives", async () => {
    const { llama } = await loadLlama({ engine: "native", gpu: "off", threads: 2 });
    try {
      const steps = nativeSteps(llama);
      if (!steps) throw new Error("the native build has no modelhostGenerate");
      const model = await llama.loadModel({ modelPath: path.join(modelsDir, "tiny.gguf") });
      // Tokens handed over by each modelhostGenerate call, and how many hand-overs there were.
      const perCall: number[] = [];
      let handOvers = 0;
      const counted: NativeSteps = {
        decodeAndSample: steps.decodeAndSample,
        generate: (...args: Parameters<NativeGenerate>) => {
          const call = perCall.push(0) - 1;
          const onSteps = args[8];
          args[8] = (tokens) => {
            handOvers++;
            perCall[call]! += tokens.length;
            onSteps(tokens);
          };
          return steps.generate(...args);
        },
      };
      // Looped with a hold of 1 s: steps go over in bursts (see below).
      const generate = (native: NativeSteps | undefined) =>
        generateNatively(model, native, {
          limit: 64,
          holdMs: 1000,
          contextSize: 512,
          sampling: { temperature: 0.9, topK: 40, topP: 0.95, minP: 0, seed: 42 },
        });
      const looped = await generate(counted);
      const separate = await generate(undefined);
      expect(looped).toHaveLength(64);
      expect(looped).toEqual(separate);
      // Every token came through the loop, and calls ran several steps each (a call also ends at
      // the model's end-of-generation tokens, after its slice, and when the event loop is slow to
      // take its steps: here 1 to 3 calls).
      console.log(`native loop: ${perCall.length} calls handed over ${perCall.join(", ")} tokens in ${handOvers} hand-overs`);
      expect(perCall.reduce((sum, count) => sum + count, 0)).toBe(64);
      expect(Math.max(...perCall)).toBeGreaterThan(1);
      expect(perCall.length).toBeLessThan(64);
      // Held for up to 1 s, steps go over when 16 are untaken (15 held and the one decoding),
      // besides the first of each call and what is left at its end: not one hand-over a token.
      expect(handOvers).toBeLessThanOrEqual(2 * perCall.length + Math.ceil(64 / 15));
      await model.dispose();
    } finally {
      await llama.dispose();
    }
  });

  it("takes no libuv pool thread for its own tasks: a file read gets through while a generation runs", async () => {
    const fixture = path.resolve(import.meta.dirname, "fixtures/readWhileGenerating.ts");
    const { stdout } = await run(process.execPath, ["--import", "tsx", fixture, path.join(modelsDir, "tiny.gguf")], {
      env: { ...process.env, UV_THREADPOOL_SIZE: "1" },
    });
    const { tokens, tokensWhenRead } = JSON.parse(stdout.trim().split("\n").at(-1)!) as { tokens: number; tokensWhenRead: number };
    console.log(`one pool thread: a file read was done after ${tokensWhenRead} of ${tokens} tokens`);
    expect(tokens).toBe(4000);
    expect(tokensWhenRead).toBeLessThan(4000);
  });

  it("gives back to the system the memory loading a model freed (glibc's malloc_trim), where the prebuilt binary cannot", async () => {
    const fixture = path.resolve(import.meta.dirname, "fixtures/trimAfterLoad.ts");
    for (const engine of ["native", "prebuilt"] as const) {
      const { stdout } = await run(process.execPath, ["--import", "tsx", fixture, path.join(modelsDir, "tiny.gguf"), engine]);
      const { trimmed, before, after } = JSON.parse(stdout.trim().split("\n").at(-1)!) as {
        trimmed: boolean;
        before: number;
        after: number;
      };
      console.log(`${engine}: trimmed ${trimmed}, anonymous memory ${before.toFixed(1)} → ${after.toFixed(1)} MiB after loading tiny`);
      expect(trimmed).toBe(engine === "native");
      // 2-10 MiB on the tiny model (its metadata and vocabulary, read twice over and freed); ~50 on
      // the Qwen2.5-0.5B shape.
      if (trimmed) expect(before - after).toBeGreaterThan(1);
    }
  });

  // The two over tiny's llama architecture (Qwen2-VL's needs its M-RoPE text model: vision.test.ts).
  const projectors = [TINY_PROJECTORS.mlp, TINY_PROJECTORS.gemma3];
  it.each(projectors)(
    "loads a $projectorType vision projector, splits a prompt at its image marker into text and image chunks, and evaluates the image into a sequence (llama.cpp's mtmd)",
    async (shape) => {
      const projectorPath = path.join(modelsDir, `mmproj-tiny-${shape.projectorType}.gguf`);
      await projectorWriter(shape, 7).write(projectorPath);
      const { llama } = await loadLlama({ engine: "native", gpu: "off", threads: 2 });
      type Part = Int32Array | { id: string; tokens: number; positions: number };
      const bindings = (llama as unknown as { _bindings: Record<string, (...args: unknown[]) => Promise<unknown>> })._bindings;
      const native = (name: string) => {
        const fn = bindings[name];
        if (!fn) throw new Error(`the native build has no ${name}`);
        return fn;
      };
      const [load, tokenize, evaluate, free] = [
        native(MULTIMODAL_LOAD),
        native(MULTIMODAL_TOKENIZE),
        native(MULTIMODAL_EVALUATE),
        native(MULTIMODAL_FREE),
      ];
      try {
        const model = await llama.loadModel({ modelPath: path.join(modelsDir, "tiny.gguf") });
        const marker = "<__media_1f3a__>";
        const projector = await load((model as unknown as { _model: unknown })._model, projectorPath, 2, marker);
        const image = (color: readonly [number, number, number]) =>
          new Uint8Array(encodePng(48, 40, (x, y) => ((x + y) % 7 ? color : [0, 0, 0])));
        const ids: string[] = [];
        for (const color of [
          [255, 0, 0],
          [0, 0, 255],
        ] as const) {
          const { chunks, parts } = (await tokenize(projector, `USER: ${marker} describe it`, [image(color)])) as {
            chunks: unknown;
            parts: Part[];
          };
          expect(parts).toHaveLength(3);
          expect(parts[0]).toBeInstanceOf(Int32Array);
          expect(parts[2]).toBeInstanceOf(Int32Array);
          const picture = parts[1] as Exclude<Part, Int32Array>;
          expect(picture).toMatchObject({ tokens: 16, positions: 16 });
          ids.push(picture.id);
          const context = await model.createContext({ sequences: 1, contextSize: 256, batchSize: 64 });
          try {
            // Into sequence 0 after the first text chunk's positions.
            const start = (parts[0] as Int32Array).length;
            expect(await evaluate(nativeContextOf(context), projector, chunks, 1, 0, start, 64)).toBe(start + 16);
          } finally {
            await context.dispose();
          }
        }
        // An image's id is the SHA-256 of its bytes, as llama-server's.
        expect(ids[0]).toMatch(/^[0-9a-f]{64}$/);
        expect(ids[0]).not.toBe(ids[1]);
        await expect(tokenize(projector, `x ${marker}`, [new Uint8Array([1, 2, 3])])).rejects.toThrow("image 0 could not be decoded");
        await expect(tokenize(projector, `x ${marker} ${marker}`, [image([1, 1, 1])])).rejects.toThrow();
        await free(projector);
        await expect(tokenize(projector, "x", [])).rejects.toThrow("The projector is freed");
        await model.dispose();
      } finally {
        await llama.dispose();
      }
    },
  );

  it("keeps the decode thread for a whole generation while nothing else waits for it, and lets another model in after a slice", async () => {
    const { llama } = await loadLlama({ engine: "native", gpu: "off", threads: 2 });
    try {
      const steps = nativeSteps(llama);
      if (!steps) throw new Error("the native build has no modelhostGenerate");
      const modelPath = path.join(modelsDir, "tiny.gguf");
      const models = [await llama.loadModel({ modelPath }), await llama.loadModel({ modelPath })] as const;
      // Generates `limit` tokens on a model, counting the native loop's calls; `onToken` sees each token.
      const generate = async (model: (typeof models)[number], limit: number, onToken?: (count: number) => void) => {
        let calls = 0;
        const counted: NativeSteps = {
          decodeAndSample: steps.decodeAndSample,
          generate: (...args: Parameters<NativeGenerate>) => (calls++, steps.generate(...args)),
        };
        const started = performance.now();
        const tokens = await generateNatively(model, counted, {
          limit,
          holdMs: 16,
          contextSize: 4096,
          sampling: GREEDY,
          ...(onToken ? { onToken } : {}),
        });
        // A call also ends after an end-of-generation token (the loop cannot know the caller goes on).
        return {
          calls,
          ends: tokens.filter((token) => model.isEogToken(token)).length,
          ms: performance.now() - started,
          tokens: tokens.length,
        };
      };

      // Alone: ~35 µs a step here, so 4,000 steps outlast several 50 ms slices, and ending a call
      // at each would cost a round trip through the event loop every time.
      const alone = await generate(models[0], 4000);
      console.log(`alone: ${alone.tokens} tokens in ${alone.ms.toFixed(0)} ms, ${alone.calls} calls, ${alone.ends} end tokens`);
      expect(alone.tokens).toBe(4000);
      // The first call, one after each end token, and at most one more should the event loop have
      // been slow to take its steps once (MAX_WAIT).
      expect(alone.calls).toBeLessThanOrEqual(alone.ends + 2);

      // With the second model asking for the decode thread, the first gives it up after a slice:
      // the short generation is over long before the long one.
      let longDone = 0;
      let started!: () => void;
      const longStarted = new Promise<void>((resolve) => (started = resolve));
      const long = generate(models[0], 4000, (count) => {
        longDone = count;
        if (count === 1) started();
      });
      await longStarted;
      const short = await generate(models[1], 8);
      const doneAtShortEnd = longDone;
      expect(short.tokens).toBe(8);
      expect((await long).tokens).toBe(4000);
      console.log(
        `with another model: the long generation was at ${doneAtShortEnd} of 4000 tokens when the short one ended, ${short.ms.toFixed(0)} ms after it asked`,
      );
      expect(doneAtShortEnd).toBeLessThan(4000);
      for (const model of models) await model.dispose();
    } finally {
      await llama.dispose();
    }
  });
});
