// Generated test models, cached in <repo>/.cache/test-models/ under the generator version so a
// change to the generator produces new files instead of reusing stale ones.
import { randomUUID } from "node:crypto";
import { access, mkdir, readFile, rename, rm } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { GENERATOR_VERSION, makeTestModel } from "../../src/testmodels/makeTestModel.js";
import { presets, type RealShape, type TestModelPresetName } from "../../src/testmodels/presets.js";
import { projectorWriter, type ProjectorShape } from "../../src/testmodels/projectorWriter.js";
import { buildLlamaCpp, run } from "./llamaCppBuild.js";
import { llamaCppSource } from "./llamaCppSource.js";

/**
 * Every preset but script-tiny (scripted models are written per script, not cached). The real
 * models' shapes (qwen2.5-0.5b-q4_k_m, ..., nomic-embed-f16) are for the bench only: generating
 * them takes minutes and gigabytes (the F16 file before quantization: 1 GB for Qwen2.5-0.5B, 2.5 GB
 * for Llama 3.2 1B) and the quantized ones need llama-quantize built (minutes more the first time).
 * No test uses them.
 */
export type CachedTestModelPreset = Exclude<TestModelPresetName, "script-tiny">;

const CACHE_DIRECTORY = fileURLToPath(new URL("../../.cache/test-models/", import.meta.url));

/**
 * llama-quantize's threads: the machines the bench runs on have 2 cores. Quantizing Llama 3.2 1B's
 * 1.24B weights to Q4_K_M takes about a minute on them.
 */
const QUANTIZE_THREADS = 2;

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
  if (await exists(path)) return path;
  // The bench passes names from its command line unchecked.
  if (!Object.hasOwn(presets, preset)) throw new Error(`Unknown test model preset: ${preset}`);
  const realShape = presets[preset].realShape;
  if (realShape === undefined) await makeTestModel({ preset, out: path });
  else await makeRealShapeModel(preset, realShape, path);
  return path;
}

/**
 * A real model's shape: its vocabulary and chat template from llama.cpp's source tree (the one
 * node-llama-cpp ships), written in F16 by makeTestModel, then quantized by llama-quantize built
 * from that same tree, as the published files were made by the same tool.
 */
async function makeRealShapeModel(preset: CachedTestModelPreset, realShape: RealShape, out: string): Promise<void> {
  const source = await llamaCppSource();
  const vocabularyFrom = path.join(source, realShape.vocabulary);
  const chatTemplate = realShape.chatTemplate === undefined ? undefined : await readFile(path.join(source, realShape.chatTemplate), "utf8");
  if (realShape.quantization === undefined) {
    await makeTestModel({ preset, out, vocabularyFrom, chatTemplate });
    return;
  }
  const unique = `${process.pid}-${randomUUID()}`;
  const f16 = path.join(path.dirname(out), `.${preset}.f16.${unique}.tmp`);
  const quantized = path.join(path.dirname(out), `.${path.basename(out)}.${unique}.tmp`);
  try {
    await makeTestModel({ preset, out: f16, vocabularyFrom, chatTemplate });
    const bin = await buildLlamaCpp(["llama-quantize"]);
    await run(path.join(bin, "llama-quantize"), [f16, quantized, realShape.quantization, String(QUANTIZE_THREADS)]);
    await rename(quantized, out);
  } finally {
    await rm(f16, { force: true });
    await rm(quantized, { force: true });
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * A vision projector of `shape` with random weights (src/testmodels/projectorWriter.ts), generated
 * once under `name` and cached beside the models: the bench's real-shape ones take seconds and
 * hundreds of megabytes.
 */
export async function testProjectorPath(name: string, shape: ProjectorShape): Promise<string> {
  const out = `${CACHE_DIRECTORY}mmproj-${name}-${GENERATOR_VERSION}.gguf`;
  if (await exists(out)) return out;
  await mkdir(CACHE_DIRECTORY, { recursive: true });
  const temporary = `${out}.${process.pid}-${randomUUID()}.tmp`;
  try {
    await projectorWriter(shape, 7).write(temporary);
    await rename(temporary, out);
  } finally {
    await rm(temporary, { force: true });
  }
  return out;
}
