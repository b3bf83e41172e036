import { randomBytes } from "node:crypto";

/** Digits, then upper case, then lower case: the order in which base62 numbers are written. */
export const BASE62_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Digits and lower case: Ollama's tool call ids (`call_` and 8 of these). */
export const BASE36_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

/**
 * `length` characters drawn uniformly from the base62 alphabet by rejection sampling random bytes.
 * A plain `byte % 62` would make 0-7 a quarter likelier than the rest (256 = 4 × 62 + 8).
 */
export function randomBase62(length: number): string {
  return randomFrom(BASE62_ALPHABET, length);
}

/** `length` characters drawn uniformly from digits and lower case (256 = 7 × 36 + 4: bytes 252-255 are redrawn). */
export function randomBase36(length: number): string {
  return randomFrom(BASE36_ALPHABET, length);
}

function randomFrom(alphabet: string, length: number): string {
  // The largest multiple of the alphabet's size that fits in a byte: bytes at or above it are redrawn, so `byte % size` is uniform.
  const unbiasedLimit = Math.floor(256 / alphabet.length) * alphabet.length;
  let text = "";
  while (text.length < length) {
    // Draw a little more than needed: about 3% of bytes are rejected (62: 8 of 256; 36: 4 of 256).
    for (const byte of randomBytes(length - text.length + 8)) {
      if (byte >= unbiasedLimit) continue;
      text += alphabet.charAt(byte % alphabet.length);
      if (text.length === length) break;
    }
  }
  return text;
}
