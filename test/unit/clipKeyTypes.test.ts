import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { GgufRefusal, readGgufHeader, REQUIRED_TYPES } from "../../src/gguf/GgufReader.js";
import { projectorWriter, TINY_PROJECTORS } from "../../src/testmodels/projectorWriter.js";
import { text } from "../../src/testmodels/modelWriterParts.js";
import { llamaCppSource } from "../support/llamaCppSource.js";

/**
 * Every metadata key mtmd's clip.cpp reads with a typed getter (gguf_get_val_bool/i32/u32/f32/str,
 * which GGML_ASSERT the type and so abort the process on another), from the llama.cpp source
 * node-llama-cpp ships (test/support/llamaCppSource.ts): KEY_* macros from clip-impl.h, and `%s` keys for each modality.
 */
async function clipTypedKeys(): Promise<Map<string, string>> {
  const mtmd = path.join(await llamaCppSource(), "tools/mtmd");
  const defines = new Map<string, string>();
  for (const [, name, value] of readFileSync(path.join(mtmd, "clip-impl.h"), "utf8").matchAll(/#define (KEY_\w+)\s+"([^"]+)"/g)) {
    defines.set(name!, value!);
  }
  const types: Record<string, string> = { bool: "bool", i32: "int32", u32: "uint32", f32: "float32", string: "string" };
  const keys = new Map<string, string>();
  const source = readFileSync(path.join(mtmd, "clip.cpp"), "utf8");
  for (const [, getter, formatted, plain] of source.matchAll(
    /\bget_(bool|i32|u32|f32|string)\(\s*(?:string_format\((KEY_\w+)|(KEY_\w+))/g,
  )) {
    const key = defines.get((formatted ?? plain)!);
    if (key === undefined) throw new Error(`clip-impl.h does not define ${formatted ?? plain}`);
    const expanded = formatted ? ["vision", "audio", "gen.audio"].map((modality) => key.replace("%s", modality)) : [key];
    for (const each of expanded) keys.set(each, types[getter!]!);
  }
  return keys;
}

describe("a vision projector's metadata types", () => {
  it("requires every key clip.cpp reads with a typed getter to have that type", async () => {
    const keys = await clipTypedKeys();
    expect(keys.size).toBeGreaterThan(50);
    for (const [key, type] of keys) expect(REQUIRED_TYPES[key], key).toBe(type);
  });

  it("refuses a projector whose image size is a string, which would abort llama.cpp", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-clip-keys-"));
    try {
      const good = path.join(dir, "good.gguf");
      await projectorWriter(TINY_PROJECTORS.mlp, 1).write(good);
      await expect(readGgufHeader(good)).resolves.toBeDefined();
      const bad = path.join(dir, "bad.gguf");
      await projectorWriter(TINY_PROJECTORS.mlp, 1).unset("clip.vision.image_size").set("clip.vision.image_size", text("32")).write(bad);
      const refusal = await readGgufHeader(bad).catch((error: unknown) => error);
      expect(refusal).toBeInstanceOf(GgufRefusal);
      expect((refusal as GgufRefusal).code).toBe("wrong_key_type");
      expect((refusal as GgufRefusal).detail).toBe('"clip.vision.image_size" is a string, not a uint32');
      // And a signed count where clip.cpp reads an unsigned one.
      const signed = path.join(dir, "signed.gguf");
      await projectorWriter(TINY_PROJECTORS.mlp, 1)
        .unset("clip.vision.block_count")
        .set("clip.vision.block_count", { type: "int32", value: 2 })
        .write(signed);
      await expect(readGgufHeader(signed)).rejects.toThrow(/"clip.vision.block_count" is a int32, not a uint32/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
