import { execFile } from "node:child_process";
import { mkdtemp, readFile, readdir, rm, symlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engineBuildTools, needs } from "../support/debianPackages.js";
import { startTestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

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
const built = (await run(process.execPath, [bin, "engine", "status", "--engine", "auto"])).stdout.includes("backend: native");

describe.skipIf(!built && !needs(...engineBuildTools))("the native engine", () => {
  let modelsDir: string;

  beforeAll(async () => {
    modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-engine-"));
    await symlink(await testModelPath("tiny"), path.join(modelsDir, "tiny.gguf"));
  });
  afterAll(() => rm(modelsDir, { recursive: true, force: true }));

  it("builds offline from the bundled source, unless already built", { timeout: 30 * 60_000 }, async () => {
    if (built) return;
    const { stdout } = await run("nice", ["-n", "19", process.execPath, bin, "engine", "build"], { maxBuffer: 64 * 1024 * 1024 });
    expect(stdout).toMatch(/Built llama\.cpp for this machine in \d+ s, with modelhost's native decode steps\./);
    // node-llama-cpp's own sources are as it ships them again.
    const addonDir = path.resolve(path.dirname(fileURLToPath(import.meta.resolve("node-llama-cpp"))), "../llama/addon");
    expect(await readFile(path.join(addonDir, "addon.cpp"), "utf8")).not.toMatch(/modelhost/);
    expect((await readdir(addonDir)).filter((file) => /modelhost/i.test(file))).toEqual([]);
  });

  it("is what `engine status` reports and what --engine native loads", async () => {
    const { stdout } = await run(process.execPath, [bin, "engine", "status", "--engine", "native"]);
    expect(stdout).toMatch(/^backend: native$/m);
    expect(stdout).toMatch(/^decode step: native loop \(decode and sample in one task, steps without the event loop\)$/m);
    expect(stdout).toMatch(/OPENMP = 1/);
  });

  it("serves chats, sampling in its native step what node-llama-cpp's own calls sample on the prebuilt binary", async () => {
    const request = (model: string) => ({ model, messages: [{ role: "user" as const, content: "Tell me about the sea." }], max_tokens: 48, temperature: 0.9, seed: 42, presence_penalty: 0.5 });
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
});
