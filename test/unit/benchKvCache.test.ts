import { describe, expect, it } from "vitest";
import { kvCacheBytesPerToken } from "../../bench/kvCache.js";
import { presets } from "../../src/testmodels/presets.js";
import { testModelPath } from "../support/testModels.js";

describe("the bench's KV cache size", () => {
  it("is layers × KV heads × (key + value width) × 2 bytes a token, from the file's metadata", async () => {
    const tiny = presets.tiny;
    if (tiny.kind !== "llama") throw new Error("tiny is a llama-architecture preset");
    const headWidth = tiny.embeddingLength / tiny.headCount;
    expect(await kvCacheBytesPerToken(await testModelPath("tiny"))).toBe(tiny.blockCount * tiny.headCountKv * 2 * headWidth * 2);
  });
});
