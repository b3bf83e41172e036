import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModelRegistry, projectorMatch } from "../../src/engine/ModelRegistry.js";
import { projectorWriter, TINY_PROJECTORS } from "../../src/testmodels/projectorWriter.js";
import { testModelPath } from "../support/testModels.js";

describe("pairing a vision projector with its model", () => {
  it("matches a projector's name, without its mmproj prefix and precision, to the start of a model's", () => {
    expect(projectorMatch("gemma-3-4b-it-Q4_K_M.gguf", "mmproj-gemma-3-4b-it-f16.gguf")).toBe("gemma-3-4b-it".length);
    expect(projectorMatch("Qwen2.5-VL-7B-Instruct-Q4_K_M.gguf", "mmproj-Qwen2.5-VL-7B-Instruct-BF16.gguf")).toBeGreaterThan(0);
    expect(projectorMatch("llava-v1.5-7b-Q4_K_M.gguf", "mmproj-model-f16.gguf")).toBe(0);
    expect(projectorMatch("gemma-3-4b-it-Q4_K_M.gguf", "mmproj-gemma-3-12b-it-f16.gguf")).toBe(0);
  });

  describe("in a models folder", () => {
    let dir: string;
    let tiny: string;
    const projector = (name: string, width: number) =>
      projectorWriter({ ...TINY_PROJECTORS.mlp, textEmbeddingLength: width }, 3).write(path.join(dir, name));

    beforeAll(async () => {
      tiny = await testModelPath("tiny");
      dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-pairing-"));
      for (const name of ["alpha", "alpha-long", "beta", "gamma", "delta"]) await symlink(tiny, path.join(dir, `${name}.gguf`));
      // alpha-long's is the longer match; beta's has the wrong width (tiny's embeddings are 64 wide).
      await projector("mmproj-alpha-f16.gguf", 64);
      await projector("mmproj-alpha-long-f16.gguf", 64);
      await projector("mmproj-beta-f16.gguf", 32);
      await projector("vision-tower.gguf", 64);
      await writeFile(
        path.join(dir, "models.json"),
        JSON.stringify({
          models: [
            { file: "gamma.gguf", projector: "vision-tower.gguf" },
            { file: "delta.gguf", projector: "missing.gguf" },
          ],
        }),
      );
    });
    afterAll(() => rm(dir, { recursive: true, force: true }));

    it("pairs by name or by models.json, lists no projector as a model, and warns of a projector named but absent", async () => {
      const warnings: string[] = [];
      const models = await new ModelRegistry(dir, { logger: { warn: (message) => warnings.push(message) } }).list();
      const pairs = Object.fromEntries(models.map((model) => [model.id, model.projector && path.basename(model.projector)]));
      expect(pairs).toEqual({
        alpha: "mmproj-alpha-f16.gguf",
        "alpha-long": "mmproj-alpha-long-f16.gguf",
        beta: undefined,
        gamma: "vision-tower.gguf",
        delta: undefined,
      });
      expect(warnings).toEqual([
        expect.stringMatching(/pairs .*delta\.gguf with .*missing\.gguf, which is not a readable vision projector here/),
      ]);
    });
  });
});
