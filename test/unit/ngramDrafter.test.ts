import type { Token } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { zeroCounters } from "../../src/core/ModelInfo.js";
import { NgramDrafter } from "../../src/engine/NgramDrafter.js";

const tokens = (...values: number[]) => values as Token[];

describe("NgramDrafter (prompt lookup)", () => {
  it("drafts what followed the latest earlier occurrence of the last three tokens, or else two", () => {
    const drafter = new NgramDrafter(16);
    // ... 1 2 3 [4 5 6 7] ... 1 2 | 3: the last three (1 2 3) were followed by 4 5 6 7.
    expect(drafter.draft(tokens(1, 2, 3, 4, 5, 6, 7, 8, 1, 2), 3 as Token, 16)).toEqual([4, 5, 6, 7]);
    // The latest occurrence wins: 1 2 3 came twice, last followed by 9.
    expect(drafter.draft(tokens(1, 2, 3, 4, 1, 2, 3, 9, 1, 2), 3 as Token, 4)).toEqual([9, 1, 2, 3]);
    // No three-token match, a two-token one: (7 3) followed by 5.
    expect(drafter.draft(tokens(7, 3, 5, 6, 0, 7), 3 as Token, 2)).toEqual([5, 6]);
    // Nothing matches; and never more than the room.
    expect(drafter.draft(tokens(1, 2, 3), 4 as Token, 16)).toEqual([]);
    expect(drafter.draft(tokens(1, 2, 3, 4, 1, 2), 3 as Token, 1)).toEqual([4]);
  });

  it("stops a draft at an image's pseudo-tokens", () => {
    const drafter = new NgramDrafter(16);
    expect(drafter.draft(tokens(1, 2, 3, 4, -9, -8, 1, 2), 3 as Token, 16)).toEqual([4]);
  });

  it("grows a draft accepted whole, shrinks one accepted in part, pauses longer after each failure in a row, and counts", () => {
    const counters = zeroCounters();
    const drafter = new NgramDrafter(16, counters);
    // A repeating text: every position has a match. `at` is the position of the token decoded.
    const text = Array.from({ length: 400 }, (_, i) => i % 20) as Token[];
    const draft = (at: number) => drafter.draft(text.slice(0, at), text[at]!, 16).length;
    expect(draft(40)).toBe(4);
    drafter.record(4, 4);
    expect(draft(45)).toBe(8);
    drafter.record(8, 8);
    expect(draft(54)).toBe(16);
    drafter.record(16, 16);
    expect(draft(71)).toBe(16);
    drafter.record(16, 3);
    expect(draft(75)).toBe(4);
    // Failures: after each, the next steps skip 1, then 2, then 4 positions, which idle() tells the
    // decoder (its native loop decodes them without asking).
    let at = 75;
    const pauses = [];
    for (let failure = 0; failure < 3; failure++) {
      drafter.record(1, 0);
      at++;
      pauses.push(drafter.idle(at));
      let skipped = 0;
      while (draft(at) === 0) {
        skipped++;
        at++;
      }
      expect(skipped).toBe(pauses.at(-1));
    }
    expect(pauses).toEqual([1, 2, 4]);
    expect(counters.draftTokens).toBe(4 + 8 + 16 + 16 + 3);
    expect(counters.draftTokensAccepted).toBe(4 + 8 + 16 + 3);
    expect(drafter.drafted).toBe(counters.draftTokens);
  });
});
