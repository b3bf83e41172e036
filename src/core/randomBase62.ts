import { randomBytes } from "node:crypto";

/** Digits, then upper case, then lower case: the order in which base62 numbers are written. */
export const BASE62_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** The largest multiple of 62 that fits in a byte: bytes at or above it are redrawn, so `byte % 62` is uniform. */
const UNBIASED_BYTE_LIMIT = 62 * 4;

/**
 * `length` characters drawn uniformly from the base62 alphabet by rejection sampling random bytes.
 * A plain `byte % 62` would make 0-7 a quarter likelier than the rest (256 = 4 × 62 + 8).
 */
export function randomBase62(length: number): string {
  let text = "";
  while (text.length < length) {
    // Draw a little more than needed: about 3% of bytes are rejected.
    for (const byte of randomBytes(length - text.length + 8)) {
      if (byte >= UNBIASED_BYTE_LIMIT) continue;
      text += BASE62_ALPHABET.charAt(byte % 62);
      if (text.length === length) break;
    }
  }
  return text;
}
