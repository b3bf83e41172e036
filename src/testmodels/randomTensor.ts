// Seeded random weights for the test models, identical on every platform.
import type { GgmlTypeName, GgufTensor } from "../gguf/GgufWriter.js";

/**
 * A tensor of uniform noise with mean 0 and standard deviation `std`. Each tensor has its own
 * random stream, derived from the seed and its name, so its values do not depend on the order in
 * which tensors are generated.
 */
export function randomTensor(name: string, dims: readonly number[], type: GgmlTypeName, std: number, seed: number): GgufTensor {
  return {
    name,
    dims,
    type,
    values: () => {
      const random = new Xoshiro128(hashName(name, seed));
      const halfWidth = std * Math.sqrt(3); // uniform on [-a, a] has standard deviation a / sqrt(3)
      const values = new Float32Array(dims.reduce((product, dim) => product * dim, 1));
      for (let i = 0; i < values.length; i++) values[i] = halfWidth * random.nextSigned();
      return values;
    },
  };
}

/** FNV-1a over the name's UTF-8 bytes, starting from the seed mixed into the offset basis. */
function hashName(name: string, seed: number): number {
  let hash = (0x811c9dc5 ^ Math.imul(seed | 0, 0x9e3779b1) ^ Math.floor(seed / 2 ** 32)) >>> 0;
  for (const byte of Buffer.from(name, "utf8")) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}

/**
 * xoshiro128** (Blackman and Vigna): a small, fast generator with only 32-bit integer arithmetic,
 * so its output is identical on every platform (unlike anything built on Math.random or
 * transcendental functions).
 */
class Xoshiro128 {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  constructor(seed: number) {
    // SplitMix32 spreads the 32-bit seed over the 128-bit state.
    let x = seed >>> 0;
    const splitMix = (): number => {
      x = (x + 0x9e3779b9) >>> 0;
      let z = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.#a = splitMix();
    this.#b = splitMix();
    this.#c = splitMix();
    this.#d = splitMix();
  }

  nextUint32(): number {
    const result = Math.imul(rotateLeft(Math.imul(this.#b, 5), 7), 9) >>> 0;
    const t = this.#b << 9;
    this.#c ^= this.#a;
    this.#d ^= this.#b;
    this.#b ^= this.#c;
    this.#a ^= this.#d;
    this.#c ^= t;
    this.#d = rotateLeft(this.#d, 11);
    return result;
  }

  /** Uniform on [-1, 1). */
  nextSigned(): number {
    return this.nextUint32() / 2 ** 31 - 1;
  }
}

function rotateLeft(value: number, bits: number): number {
  return (value << bits) | (value >>> (32 - bits));
}
