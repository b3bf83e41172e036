// The patch `modelhost engine build` applies to node-llama-cpp's addon.cpp and AddonContext.cpp:
// against the pinned version's own files, changes that undo exactly; on another layout, none.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  DECODE_AND_SAMPLE,
  GENERATE,
  llamaDir,
  PATCHED_NODE_LLAMA_CPP_VERSION,
  patchAddonSource,
  patchCMakeLists,
  patchContextSource,
  unpatchAddonSource,
  unpatchCMakeLists,
  unpatchContextSource,
  TRIM_MEMORY,
  MULTIMODAL_EVALUATE,
  MULTIMODAL_FREE,
  MULTIMODAL_LOAD,
  MULTIMODAL_TOKENIZE,
} from "../../src/engine/native/addonPatch.js";

describe("the decode-and-sample addon patch", () => {
  it("is written for the node-llama-cpp version installed", async () => {
    const { version } = JSON.parse(await readFile(path.join(llamaDir(), "../package.json"), "utf8")) as { version: string };
    expect(version).toBe(PATCHED_NODE_LLAMA_CPP_VERSION);
  });

  it("declares and exports each function once in addon.cpp, and comes out exactly", async () => {
    const original = await readFile(path.join(llamaDir(), "addon/addon.cpp"), "utf8");
    const result = patchAddonSource(original);
    if (!("patched" in result)) throw new Error(result.skipped);
    for (const name of [
      DECODE_AND_SAMPLE,
      GENERATE,
      TRIM_MEMORY,
      MULTIMODAL_LOAD,
      MULTIMODAL_TOKENIZE,
      MULTIMODAL_EVALUATE,
      MULTIMODAL_FREE,
    ]) {
      expect(result.patched.split(`Napi::Value ${name}(const Napi::CallbackInfo& info);`)).toHaveLength(2);
      expect(result.patched.split(`Napi::PropertyDescriptor::Function("${name}", ${name})`)).toHaveLength(2);
    }
    expect(result.patched.length - original.length).toBeLessThan(1200);
    expect(unpatchAddonSource(result.patched)).toBe(original);
    // A build cut off before the restore left the patch in: the next one starts from the original.
    expect(unpatchAddonSource(original)).toBe(original);
  });

  it("sends AddonContext.cpp's one llama_decode through modelhostDecode, and comes out exactly", async () => {
    const original = await readFile(path.join(llamaDir(), "addon/AddonContext.cpp"), "utf8");
    const result = patchContextSource(original);
    if (!("patched" in result)) throw new Error(result.skipped);
    expect(result.patched).not.toContain("llama_decode(");
    expect(result.patched.split("modelhostDecode(ctx->ctx, ctx->batch)")).toHaveLength(2);
    // Declared before its use.
    expect(result.patched.indexOf("int modelhostDecode(llama_context* ctx, llama_batch batch);")).toBeLessThan(
      result.patched.indexOf("modelhostDecode(ctx->ctx"),
    );
    expect(unpatchContextSource(result.patched)).toBe(original);
    expect(unpatchContextSource(original)).toBe(original);
  });

  it("builds llama.cpp's mtmd without its ffmpeg video path and links it into the addon, and comes out exactly", async () => {
    const original = await readFile(path.join(llamaDir(), "CMakeLists.txt"), "utf8");
    const result = patchCMakeLists(original);
    if (!("patched" in result)) throw new Error(result.skipped);
    const lines = result.patched.split("\n");
    // Set before llama.cpp's folder is added (its option() takes the value), linked after the addon's own libraries.
    expect(lines.indexOf("set(LLAMA_BUILD_MTMD ON)")).toBeLessThan(lines.indexOf('add_subdirectory("llama.cpp")'));
    expect(lines).toContain('set(MTMD_VIDEO OFF CACHE BOOL "" FORCE)');
    expect(lines.indexOf('target_link_libraries(${PROJECT_NAME} "mtmd")')).toBe(
      lines.indexOf('target_link_libraries(${PROJECT_NAME} "llama-common")') + 1,
    );
    expect(unpatchCMakeLists(result.patched)).toBe(original);
    expect(unpatchCMakeLists(original)).toBe(original);
    expect(patchCMakeLists("project(x)\n")).toEqual({ skipped: "CMakeLists.txt is not laid out as expected" });
  });

  it("leaves files of another layout alone", () => {
    expect(patchAddonSource("int main() {}\n")).toEqual({ skipped: "addon.cpp is not laid out as expected" });
    expect(patchContextSource('#include "AddonContext.h"\nint main() {}\n')).toEqual({
      skipped: "AddonContext.cpp is not laid out as expected",
    });
  });
});
