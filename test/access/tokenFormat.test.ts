import { createHash } from "node:crypto";
import zlib from "node:zlib";
import { describe, expect, it } from "vitest";
import { randomBase62 } from "../../src/core/randomBase62.js";
import { crc32, generateToken, hashToken, isWellFormedToken, tableCrc32, tokensEqual } from "../../src/access/tokenFormat.js";

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

describe("generateToken", () => {
  it("makes mh_, 32 random and 6 checksum base62 characters, a 10-character prefix and the SHA-256 of the whole", () => {
    const { token, prefix, hash } = generateToken();
    expect(token).toMatch(/^mh_[0-9A-Za-z]{38}$/);
    expect(prefix).toBe(token.slice(0, 10));
    expect(hash).toBe(createHash("sha256").update(token).digest("hex"));
    expect(isWellFormedToken(token)).toBe(true);
  });

  it("never repeats itself", () => {
    const tokens = new Set(Array.from({ length: 1_000 }, () => generateToken().token));
    expect(tokens.size).toBe(1_000);
  });
});

describe("isWellFormedToken", () => {
  it("refuses every single-character typo", () => {
    for (let sample = 0; sample < 20; sample++) {
      const { token } = generateToken();
      for (let position = 0; position < token.length; position++) {
        for (const replacement of ALPHABET + "_-") {
          if (replacement === token[position]) continue;
          const typo = token.slice(0, position) + replacement + token.slice(position + 1);
          expect(isWellFormedToken(typo), typo).toBe(false);
        }
      }
    }
  });

  it("refuses truncated, extended, wrapped and foreign tokens", () => {
    const { token } = generateToken();
    for (const text of [token.slice(0, -1), token + "a", ` ${token}`, `${token}\n`, token.replace("mh_", "gh_"), "", "mh_", "sk-abc"]) {
      expect(isWellFormedToken(text), JSON.stringify(text)).toBe(false);
    }
  });
});

describe("crc32", () => {
  // The standard check values of CRC-32/ISO-HDLC, the zlib/PNG/Ethernet one.
  const vectors: [string, number][] = [
    ["", 0],
    ["a", 0xe8b7be43],
    ["123456789", 0xcbf43926],
    ["The quick brown fox jumps over the lazy dog", 0x414fa339],
  ];

  it.each(vectors)("crc32(%j) = %i", (text, expected) => {
    expect(crc32(Buffer.from(text))).toBe(expected);
    expect(tableCrc32(Buffer.from(text))).toBe(expected);
  });

  it.runIf(typeof zlib.crc32 === "function")("the table implementation agrees with zlib's on random data", () => {
    for (let length = 0; length < 300; length += 7) {
      const data = Buffer.from(randomBase62(length));
      expect(tableCrc32(data)).toBe(zlib.crc32(data));
    }
  });
});

describe("hashToken and tokensEqual", () => {
  it("hashes with SHA-256 in hex", () => {
    expect(hashToken("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });

  it("compares hex hashes", () => {
    const a = hashToken(generateToken().token);
    const b = hashToken(generateToken().token);
    expect(tokensEqual(a, a)).toBe(true);
    expect(tokensEqual(a, a.toUpperCase())).toBe(true);
    expect(tokensEqual(a, b)).toBe(false);
  });

  it("finds nothing equal that is not a SHA-256 hash, even to itself", () => {
    const a = hashToken("x");
    for (const bad of ["", "zz", a.slice(0, -2), `${a}00`, a.replace(/^./, "g")]) {
      expect(tokensEqual(bad, bad), bad).toBe(false);
      expect(tokensEqual(a, bad), bad).toBe(false);
    }
  });
});
