import path from "node:path";
import { loraAdapterWriter } from "../../src/testmodels/loraAdapterWriter.js";
import { presets, type LlamaPreset } from "../../src/testmodels/presets.js";

/** The tiny model's two test adapters as models.json declares them: `tiny+a` at scale 1, `tiny+b` at 0.5 (ids 0 and 1). */
export const TINY_ADAPTERS = [
  { file: "lora-a.gguf", name: "a" },
  { file: "lora-b.gguf", name: "b", scale: 0.5 },
] as const;

/**
 * Writes the tiny model's two random adapters (seeds 1 and 2) into `dir`, under TINY_ADAPTERS'
 * file names; resolves to their paths, by startTestServer's model name (`lora-a`, `lora-b`).
 */
export async function writeTinyAdapters(dir: string): Promise<Record<"lora-a" | "lora-b", string>> {
  const [a, b] = TINY_ADAPTERS.map(({ file }) => path.join(dir, file)) as [string, string];
  await loraAdapterWriter(presets.tiny as LlamaPreset, 1).write(a);
  await loraAdapterWriter(presets.tiny as LlamaPreset, 2).write(b);
  return { "lora-a": a, "lora-b": b };
}
