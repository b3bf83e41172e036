import { describe, expect, it } from "vitest";
import { StopSequenceMatcher } from "../../src/engine/StopSequenceMatcher.js";

function run(stops: string[], pieces: string[]): { text: string; stopped: boolean } {
  const matcher = new StopSequenceMatcher(stops);
  let text = "";
  for (const piece of pieces) {
    const result = matcher.push(piece);
    text += result.text;
    if (result.stopped) return { text, stopped: true };
  }
  return { text: text + matcher.flush(), stopped: false };
}

describe("StopSequenceMatcher", () => {
  it("passes text through when there are no stop sequences", () => {
    expect(run([], ["a", "b"])).toEqual({ text: "ab", stopped: false });
  });

  it("cuts before a stop sequence inside one piece", () => {
    expect(run(["END"], ["abcENDdef"])).toEqual({ text: "abc", stopped: true });
  });

  it("finds a stop sequence split across pieces and never emits its start", () => {
    const matcher = new StopSequenceMatcher(["\nUser:"]);
    expect(matcher.push("hello\nUs")).toEqual({ text: "hello", stopped: false });
    expect(matcher.push("er")).toEqual({ text: "", stopped: false });
    expect(matcher.push(": hi")).toEqual({ text: "", stopped: true, matched: "\nUser:" });
  });

  it("releases held text once it can no longer start a stop sequence", () => {
    const matcher = new StopSequenceMatcher(["STOP"]);
    expect(matcher.push("xST")).toEqual({ text: "x", stopped: false });
    expect(matcher.push("AY")).toEqual({ text: "STAY", stopped: false });
  });

  it("uses the earliest of several stop sequences", () => {
    expect(run(["b", "a"], ["xxab"])).toEqual({ text: "xx", stopped: true });
  });

  it("flushes held text when generation ends for another reason", () => {
    expect(run(["STOP"], ["abST"])).toEqual({ text: "abST", stopped: false });
  });

  it("names the stop sequence it found, the earliest when several are in the text", () => {
    const matcher = new StopSequenceMatcher(["zz", "END", "x"]);
    expect(matcher.push("abEN")).toEqual({ text: "ab", stopped: false });
    expect(matcher.push("Dx")).toEqual({ text: "", stopped: true, matched: "END" });
  });

  it("handles a stop sequence that is a prefix of itself repeated", () => {
    expect(run(["aab"], ["a", "a", "a", "b"])).toEqual({ text: "a", stopped: true });
  });
});
