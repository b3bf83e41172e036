import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestModel } from "../../src/testmodels/makeTestModel.js";
import type { TestModelPresetName } from "../../src/testmodels/presets.js";
import { testModelPath, type CachedTestModelPreset } from "./testModels.js";

/**
 * The generator's promise for a preset: the same seed gives byte-identical files, another seed a
 * different file of the same size, and the default seed the file the test cache holds.
 */
export function describeDeterministicGeneration(preset: TestModelPresetName & CachedTestModelPreset): void {
  describe("generation", () => {
    let directory: string;

    beforeAll(async () => {
      directory = await mkdtemp(join(tmpdir(), `${preset}-generation-`));
    });

    afterAll(async () => {
      await rm(directory, { recursive: true, force: true });
    });

    it("writes byte-identical files for the same seed, and the cached file matches", async () => {
      const [a, b, other, fresh] = await Promise.all([
        makeTestModel({ preset, out: join(directory, "a.gguf"), seed: 7 }),
        makeTestModel({ preset, out: join(directory, "b.gguf"), seed: 7 }),
        makeTestModel({ preset, out: join(directory, "other.gguf"), seed: 8 }),
        makeTestModel({ preset, out: join(directory, "default.gguf") }),
      ]);
      const [bytesA, bytesB, bytesOther, bytesFresh, cached] = await Promise.all([
        readFile(a.path),
        readFile(b.path),
        readFile(other.path),
        readFile(fresh.path),
        readFile(await testModelPath(preset)),
      ]);

      expect(a.bytes).toBe(bytesA.length);
      expect(bytesB.equals(bytesA)).toBe(true);
      expect(bytesOther.equals(bytesA)).toBe(false);
      expect(bytesOther.length).toBe(bytesA.length);
      // A stale cache means GENERATOR_VERSION was not bumped after a change to the generator.
      expect(bytesFresh.equals(cached)).toBe(true);
    });
  });
}
