import { describe, expect, it } from "vitest";
import { kvCacheBytesPerToken, kvCacheScale } from "../../bench/kvCache.js";
import { presets } from "../../src/testmodels/presets.js";
import { testModelPath } from "../support/testModels.js";

describe("the bench's KV cache size", () => {
  it("is layers × KV heads × (key + value width) × 2 bytes a token, from the file's metadata", async () => {
    const tiny = presets.tiny;
    if (tiny.kind !== "llama") throw new Error("tiny is a llama-architecture preset");
    const headWidth = tiny.embeddingLength / tiny.headCount;
    expect(await kvCacheBytesPerToken(await testModelPath("tiny"))).toBe(tiny.blockCount * tiny.headCountKv * 2 * headWidth * 2);
  });

  it("scales to a quantized cache by its 32-value blocks' bytes (q8_0: 34, q4_0: 18), and names the types it cannot size", () => {
    expect(kvCacheScale("f16")).toBe(1);
    expect(kvCacheScale("q8_0")).toBe(34 / 64);
    expect(kvCacheScale("q4_0")).toBe(18 / 64);
    expect(() => kvCacheScale("iq4_nl")).toThrow("no size for a iq4_nl KV cache");
  });
});
