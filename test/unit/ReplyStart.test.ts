import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ReplyStart } from "../../src/engine/ReplyStart.js";

/** The text given out and whether a call opened, for a reply pushed in these pieces, then flushed. */
function run(pieces: readonly string[]): { text: string; call: boolean; dropped: string } {
  const start = new ReplyStart("all\n", ["get_weather\n", "get_time\n"]);
  let text = "";
  for (const piece of pieces) {
    const out = start.push(piece);
    if (out.call) return { text, call: true, dropped: start.dropped };
    text += out.text;
  }
  return { text: text + start.flush(), call: false, dropped: start.dropped };
}

/** A text cut into pieces at the given points. */
function cut(text: string, points: number[]): string[] {
  const at = [...new Set(points.map((point) => point % (text.length + 1)))].sort((a, b) => a - b);
  return [0, ...at].map((from, i) => text.slice(from, [...at, text.length][i]));
}

describe("ReplyStart (a reply that names its recipient first: Functionary v3.2)", () => {
  it("leaves the text recipient's header out of the text, and keeps it for the sequence", () => {
    expect(run(["all\nBlue."])).toEqual({ text: "Blue.", call: false, dropped: "all\n" });
  });

  it("opens a call where the reply names a function, giving out nothing it held", () => {
    expect(run(["get_", "weather\n{"])).toEqual({ text: "", call: true, dropped: "" });
  });

  it("gives out other text as it is, held only while it may still be a header or an opening", () => {
    const start = new ReplyStart("all\n", ["get_weather\n"]);
    expect(start.push("al")).toEqual({ text: "", call: false });
    expect(start.push("so fine")).toEqual({ text: "also fine", call: false });
    // Decided: a later header is text.
    expect(start.push("all\n")).toEqual({ text: "all\n", call: false });
    expect(run(["all"])).toEqual({ text: "all", call: false, dropped: "" });
    expect(run(["get_weather"])).toEqual({ text: "get_weather", call: false, dropped: "" });
  });

  it("reads the same reply alike however it is cut", () => {
    const replies = fc.constantFrom("all\nBlue.", "get_time\n{}", "get_weather", "alle", "Blue.", "", "all\nall\n");
    fc.assert(
      fc.property(replies, fc.array(fc.nat(), { maxLength: 6 }), (reply, points) => {
        expect(run(cut(reply, points))).toEqual(run([reply]));
      }),
    );
  });
});
