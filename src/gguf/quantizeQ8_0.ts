// Q8_0 quantization and the IEEE half-precision conversion it needs for its block scales.
// Both follow ggml's reference code (ggml-quants.c `quantize_row_q8_0_ref`, ggml-impl.h
// `ggml_compute_fp32_to_fp16`) bit for bit, so a file we write matches what llama.cpp's own
// quantizer would produce from the same float32 weights.

/** Values per Q8_0 block. A Q8_0 tensor's row length must be a multiple of this. */
export const Q8_0_BLOCK_SIZE = 32;

/** Bytes per Q8_0 block: an f16 scale followed by 32 signed bytes. */
export const Q8_0_BLOCK_BYTES = 2 + Q8_0_BLOCK_SIZE;

const f32 = new Float32Array(1);
const f32Bits = new Uint32Array(f32.buffer);

/**
 * Converts a number to the bits of the nearest IEEE 754 binary16 value (round half to even),
 * going through float32 first as ggml does. Overflow gives ±Infinity; NaN stays NaN.
 */
export function float32ToFloat16Bits(value: number): number {
  f32[0] = value;
  const bits = f32Bits[0] ?? 0;
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  const mantissa = bits & 0x7fffff;

  if (exponent === 0xff) return sign | 0x7c00 | (mantissa !== 0 ? 0x200 : 0);

  const halfExponent = exponent - 127 + 15;
  if (halfExponent >= 0x1f) return sign | 0x7c00;
  if (halfExponent <= 0) {
    // Subnormal half: the value is (1.mantissa) * 2^(exponent-127) = significand * 2^-24,
    // where significand = (mantissa | implicit bit) >> (14 - halfExponent), rounded.
    const shift = 14 - halfExponent;
    if (shift > 24) return sign;
    return sign | roundShiftHalfEven(mantissa | 0x800000, shift);
  }
  // A rounding carry out of the mantissa correctly bumps the exponent (up to Infinity).
  return sign | ((halfExponent << 10) + roundShiftHalfEven(mantissa, 13));
}

/** value / 2^shift rounded to the nearest integer, ties to even (0 < shift < 31). */
function roundShiftHalfEven(value: number, shift: number): number {
  const truncated = value >>> shift;
  const remainder = value & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  return remainder > half || (remainder === half && (truncated & 1) === 1) ? truncated + 1 : truncated;
}

/** The value of IEEE 754 binary16 bits. */
export function float16BitsToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa === 0 ? sign * Infinity : NaN;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/**
 * Quantizes float32 values to Q8_0 blocks: for each run of 32 values, d = max|x| / 127 stored as
 * f16, then q = round(x / d) as int8 (the ggml reference multiplies by the float32 reciprocal of
 * d, and rounds half away from zero like C's roundf). Dequantized, x ≈ d * q.
 */
export function quantizeQ8_0(values: Float32Array): Uint8Array {
  if (values.length % Q8_0_BLOCK_SIZE !== 0) {
    throw new RangeError(`Q8_0 needs a multiple of ${Q8_0_BLOCK_SIZE} values, got ${values.length}`);
  }
  const blocks = values.length / Q8_0_BLOCK_SIZE;
  const out = new Uint8Array(blocks * Q8_0_BLOCK_BYTES);
  const view = new DataView(out.buffer);
  for (let block = 0; block < blocks; block++) {
    const start = block * Q8_0_BLOCK_SIZE;
    let absMax = 0;
    for (let i = start; i < start + Q8_0_BLOCK_SIZE; i++) absMax = Math.max(absMax, Math.abs(values[i] ?? 0));

    // Each step is computed in double and rounded to float32; for one +, *, / on float32 inputs
    // that equals the float32 operation, so this matches ggml exactly.
    const d = Math.fround(absMax / 127);
    const inverse = d !== 0 ? Math.fround(1 / d) : 0;

    const offset = block * Q8_0_BLOCK_BYTES;
    view.setUint16(offset, float32ToFloat16Bits(d), true);
    for (let i = 0; i < Q8_0_BLOCK_SIZE; i++) {
      const scaled = Math.fround((values[start + i] ?? 0) * inverse);
      view.setInt8(offset + 2 + i, Math.sign(scaled) * Math.round(Math.abs(scaled)));
    }
  }
  return out;
}
