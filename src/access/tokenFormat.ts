import { createHash, timingSafeEqual } from "node:crypto";
import zlib from "node:zlib";
import { BASE62_ALPHABET, randomBase62 } from "../core/randomBase62.js";

/**
 * Personal access tokens in the style of GitHub's: `mh_`, 32 random base62 characters, then a
 * 6-character base62 CRC32 of the random part. The fixed prefix lets secret scanners and people
 * recognise a leaked token; the checksum lets the server refuse a mistyped or truncated token
 * without touching the database.
 */
const TOKEN_PREFIX = "mh_";

/** 32 × log2(62) ≈ 190 bits of randomness. */
const RANDOM_LENGTH = 32;
/** 62^6 ≈ 5.7e10 > 2^32, so six characters hold any CRC32. */
const CHECKSUM_LENGTH = 6;
/** What a listing shows: `mh_` and 7 random characters, enough to tell tokens apart. */
const DISPLAY_PREFIX_LENGTH = 10;

const TOKEN_SHAPE = new RegExp(`^${TOKEN_PREFIX}[0-9A-Za-z]{${RANDOM_LENGTH + CHECKSUM_LENGTH}}$`);
const HEX_SHA256 = /^[0-9a-f]{64}$/i;

export interface GeneratedToken {
  /** The secret, shown to its owner once. */
  token: string;
  /** The first characters, stored for display. */
  prefix: string;
  /** Hex SHA-256 of the whole token: what the store keeps. */
  hash: string;
}

export function generateToken(): GeneratedToken {
  const random = randomBase62(RANDOM_LENGTH);
  const token = TOKEN_PREFIX + random + checksumOf(random);
  return { token, prefix: token.slice(0, DISPLAY_PREFIX_LENGTH), hash: hashToken(token) };
}

/** The right shape and a matching checksum: anything else cannot be a token we issued. */
export function isWellFormedToken(text: string): boolean {
  if (!TOKEN_SHAPE.test(text)) return false;
  const random = text.slice(TOKEN_PREFIX.length, TOKEN_PREFIX.length + RANDOM_LENGTH);
  return text.slice(TOKEN_PREFIX.length + RANDOM_LENGTH) === checksumOf(random);
}

export function hashToken(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/**
 * Compares two hex SHA-256 hashes in constant time. Anything that is not one is unequal: decoding
 * bad hex would silently truncate (two malformed strings could decode to the same empty buffer),
 * and `timingSafeEqual` throws on buffers of different lengths.
 */
export function tokensEqual(hashA: string, hashB: string): boolean {
  if (!HEX_SHA256.test(hashA) || !HEX_SHA256.test(hashB)) return false;
  return timingSafeEqual(Buffer.from(hashA, "hex"), Buffer.from(hashB, "hex"));
}

function checksumOf(random: string): string {
  return toBase62(crc32(Buffer.from(random, "ascii"))).padStart(CHECKSUM_LENGTH, "0");
}

function toBase62(value: number): string {
  let text = "";
  do {
    text = BASE62_ALPHABET.charAt(value % 62) + text;
    value = Math.floor(value / 62);
  } while (value > 0);
  return text;
}

/** CRC-32 (IEEE 802.3, as zlib computes it) of `data`: Node's native one when it has it (20.15+), else a table-driven one. */
export function crc32(data: Uint8Array): number {
  return typeof zlib.crc32 === "function" ? zlib.crc32(data) : tableCrc32(data);
}

let crcTable: Uint32Array | undefined;

/** The reflected polynomial 0xEDB88320, one table lookup per byte; for Node releases before 20.15. */
export function tableCrc32(data: Uint8Array): number {
  crcTable ??= buildCrcTable();
  let crc = 0xffffffff;
  for (const byte of data) crc = crcTable[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function buildCrcTable(): Uint32Array {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let bit = 0; bit < 8; bit++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
}
