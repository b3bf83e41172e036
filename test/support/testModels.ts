// Generated test models, cached in <repo>/.cache/test-models/ under the generator version so a
// change to the generator produces new files instead of reusing stale ones.
import { access } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { GENERATOR_VERSION, makeTestModel } from "../../src/testmodels/makeTestModel.js";

export type CachedTestModelPreset = "tiny" | "bench" | "embed-tiny" | "think-tiny" | "rerank-tiny" | "fim-tiny" | "long-tiny";

const CACHE_DIRECTORY = fileURLToPath(new URL("../../.cache/test-models/", import.meta.url));

const pending = new Map<CachedTestModelPreset, Promise<string>>();

/**
 * Path of the preset's model generated with the default seed, generating it on first use.
 * Vitest workers are separate processes and may generate the same file at the same time; that
 * is safe because makeTestModel writes a temporary file and renames it into place atomically,
 * and both writers produce identical bytes.
 */
export function testModelPath(preset: CachedTestModelPreset): Promise<string> {
  let path = pending.get(preset);
  if (path === undefined) {
    path = ensureGenerated(preset);
    pending.set(preset, path);
    // A failed generation should be retried by the next caller rather than cached.
    path.catch(() => pending.delete(preset));
  }
  return path;
}

async function ensureGenerated(preset: CachedTestModelPreset): Promise<string> {
  const path = `${CACHE_DIRECTORY}${preset}-${GENERATOR_VERSION}.gguf`;
  if (!(await exists(path))) await makeTestModel({ preset, out: path });
  return path;
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
