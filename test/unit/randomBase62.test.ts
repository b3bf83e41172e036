import { describe, expect, it } from "vitest";
import { BASE36_ALPHABET, BASE62_ALPHABET, randomBase36, randomBase62 } from "../../src/core/randomBase62.js";

describe("randomBase62", () => {
  it("draws every character of the alphabet uniformly", () => {
    // Without rejection sampling, `byte % 62` makes 0-7 a quarter likelier than the rest: at this
    // sample size that is a chi-square in the thousands. For 61 degrees of freedom, 125 has odds
    // of about one in a million of being exceeded by chance.
    const sample = randomBase62(200_000);
    const counts = new Map<string, number>();
    for (const char of sample) counts.set(char, (counts.get(char) ?? 0) + 1);
    expect([...counts.keys()].sort().join("")).toBe([...BASE62_ALPHABET].sort().join(""));
    const expected = sample.length / BASE62_ALPHABET.length;
    const chiSquare = [...counts.values()].reduce((sum, count) => sum + (count - expected) ** 2 / expected, 0);
    expect(chiSquare).toBeLessThan(125);
  });

  it("returns exactly the length asked for", () => {
    for (const length of [0, 1, 7, 32, 1_000]) expect(randomBase62(length)).toHaveLength(length);
  });
});

describe("randomBase36", () => {
  it("draws digits and lower case only, uniformly", () => {
    // 35 degrees of freedom: a chi-square of 90 has odds of about one in a million by chance.
    const sample = randomBase36(100_000);
    const counts = new Map<string, number>();
    for (const char of sample) counts.set(char, (counts.get(char) ?? 0) + 1);
    expect([...counts.keys()].sort().join("")).toBe(BASE36_ALPHABET);
    const expected = sample.length / BASE36_ALPHABET.length;
    expect([...counts.values()].reduce((sum, count) => sum + (count - expected) ** 2 / expected, 0)).toBeLessThan(90);
  });
});
