import { describe, expect, it } from "vitest";
import { Q8_0_BLOCK_BYTES, float16BitsToNumber, float32ToFloat16Bits, quantizeQ8_0 } from "../../src/gguf/quantizeQ8_0.js";

describe("float32ToFloat16Bits", () => {
  it.each([
    [0, 0x0000],
    [-0, 0x8000],
    [1, 0x3c00],
    [-2, 0xc000],
    [0.1, 0x2e66],
    [1 / 3, 0x3555],
    [65504, 0x7bff], // largest finite half
    [65520, 0x7c00], // halfway to the next power of two rounds to Infinity
    [Infinity, 0x7c00],
    [-Infinity, 0xfc00],
    [2 ** -14, 0x0400], // smallest normal
    [2 ** -24, 0x0001], // smallest subnormal
    [2 ** -25, 0x0000], // tie between 0 and the smallest subnormal: to even
    [3 * 2 ** -25, 0x0002], // tie between 1 and 2 subnormal steps: to even
    [1 + 2 ** -11, 0x3c00], // tie: to even
    [1 + 3 * 2 ** -11, 0x3c02], // tie: to even
    [2 ** -14 - 2 ** -25, 0x0400], // rounds up from the largest subnormal into the normal range
  ])("converts %d to bits %i", (value, bits) => {
    expect(float32ToFloat16Bits(value)).toBe(bits);
  });

  it("keeps NaN a NaN", () => {
    const bits = float32ToFloat16Bits(NaN);
    expect(bits & 0x7c00).toBe(0x7c00);
    expect(bits & 0x3ff).not.toBe(0);
  });

  it("round-trips every finite half value", () => {
    const mismatches: number[] = [];
    for (let bits = 0; bits < 0x10000; bits++) {
      const finite = (bits & 0x7c00) !== 0x7c00;
      if (finite && float32ToFloat16Bits(float16BitsToNumber(bits)) !== bits) mismatches.push(bits);
    }
    expect(mismatches).toEqual([]);
  });
});

describe("quantizeQ8_0", () => {
  it("stores the scale max|x|/127 as f16 and rounds x/d half away from zero", () => {
    // max|x| = 127 makes d exactly 1, so x/d is x and the rounding is visible.
    const values = new Float32Array(32);
    values.set([127, 0.5, -0.5, 2.5, -2.5, 1.49, -126.6]);
    const block = quantizeQ8_0(values);
    const view = new DataView(block.buffer);

    expect(block.length).toBe(Q8_0_BLOCK_BYTES);
    expect(view.getUint16(0, true)).toBe(0x3c00);
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((i) => view.getInt8(2 + i))).toEqual([127, 1, -1, 3, -3, 1, -127, 0]);
  });

  it("quantizes each block of 32 with its own scale", () => {
    const values = Float32Array.from({ length: 64 }, (_, i) => (i < 32 ? i - 16 : (i - 48) / 1000));
    const blocks = quantizeQ8_0(values);
    const view = new DataView(blocks.buffer);

    expect(blocks.length).toBe(2 * Q8_0_BLOCK_BYTES);
    expect(float16BitsToNumber(view.getUint16(0, true))).toBeCloseTo(16 / 127, 4);
    expect(view.getInt8(2)).toBe(-127);
    expect(float16BitsToNumber(view.getUint16(Q8_0_BLOCK_BYTES, true))).toBeCloseTo(0.016 / 127, 7);
    expect(view.getInt8(Q8_0_BLOCK_BYTES + 2)).toBe(-127);
  });

  it("writes a zero scale and zero quants for an all-zero block", () => {
    expect([...quantizeQ8_0(new Float32Array(32))]).toEqual(Array<number>(Q8_0_BLOCK_BYTES).fill(0));
  });

  it("dequantizes to within one quantization step", () => {
    const values = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i * 12.9898) * (1 + (i % 7)));
    const blocks = quantizeQ8_0(values);
    const view = new DataView(blocks.buffer);
    values.forEach((value, i) => {
      const block = Math.floor(i / 32);
      const d = float16BitsToNumber(view.getUint16(block * Q8_0_BLOCK_BYTES, true));
      const q = view.getInt8(block * Q8_0_BLOCK_BYTES + 2 + (i % 32));
      expect(Math.abs(value - d * q)).toBeLessThanOrEqual(d);
    });
  });

  it("rejects a length that is not a whole number of blocks", () => {
    expect(() => quantizeQ8_0(new Float32Array(33))).toThrow(RangeError);
  });
});
