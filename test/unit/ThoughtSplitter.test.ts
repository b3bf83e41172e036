import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { chatFormatOf } from "../../src/chatTemplates/chatFormats.js";
import { ThoughtSplitter } from "../../src/engine/ThoughtSplitter.js";

const markers = { open: "<think>", close: "</think>" };

/** gpt-oss's harmony channels, as chatFormatOf reads them from its template. */
const harmony = chatFormatOf("<|channel|>…<|message|>").thought!;

/** Pushes the pieces in order, then flushes; returns everything given out, and each push's result. */
function run(pieces: string[], opened = false, with_ = markers) {
  const splitter = new ThoughtSplitter(with_, opened);
  const steps = pieces.map((piece) => splitter.push(piece));
  const end = splitter.flush();
  const all = [...steps, end];
  return {
    thinking: all.map((step) => step.thinking).join(""),
    text: all.map((step) => step.text).join(""),
    steps,
    raw: splitter.raw,
    pieces: splitter.thoughtPieces,
  };
}

/** Every way to cut `text` into pieces at the given positions. */
function cut(text: string, positions: number[]): string[] {
  const sorted = [...new Set(positions.map((position) => position % (text.length + 1)))].sort((a, b) => a - b);
  const pieces: string[] = [];
  let from = 0;
  for (const position of sorted) {
    pieces.push(text.slice(from, position));
    from = position;
  }
  pieces.push(text.slice(from));
  return pieces;
}

describe("ThoughtSplitter", () => {
  it("splits harmony's analysis channel from its final one, headers left out however the text is cut", () => {
    const reply = "<|channel|>analysis<|message|>User asks. Easy.<|end|><|start|>assistant<|channel|>final<|message|>Four.";
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 12 }), (positions) => {
        const result = run(cut(reply, positions), false, harmony);
        expect(result).toMatchObject({ thinking: "User asks. Easy.", text: "Four." });
        expect(result.raw).toBe("<|channel|>analysis<|message|>User asks. Easy.<|end|><|start|>assistant<|channel|>final<|message|>");
      }),
      { seed: 31, numRuns: 200 },
    );
  });

  it("reads a harmony reply without analysis as all answer, its final header left out", () => {
    expect(run(["<|channel|>", "final<|message|>", "Four."], false, harmony)).toMatchObject({ thinking: "", text: "Four." });
    // A call after the analysis: the answer so far is the start header, kept for the call's prompt.
    const call = run(["<|channel|>analysis<|message|>Call it.<|end|>", "<|start|>assistant"], false, harmony);
    expect(call).toMatchObject({ thinking: "Call it.", text: "" });
    expect(call.raw).toBe("<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant");
    // Text that only began like a header is answer after all.
    expect(run(["<|chan"], false, harmony)).toMatchObject({ thinking: "", text: "<|chan" });
  });

  it("separates a Qwen3-style thought from the answer, markers and their line breaks left out", () => {
    const result = run(["<think>\nLet me see.\n</think>\n\nFour."]);
    expect(result).toMatchObject({ thinking: "Let me see.", text: "Four." });
    expect(result.raw).toBe("<think>\nLet me see.\n</think>\n\n");
  });

  it("finds markers split across tokens, token by token, and gives thought out before it ends", () => {
    const result = run(["<th", "ink", ">\n", "Let", " me", " see", "\n</", "th", "ink>", "\n\n", "Four", "."]);
    expect(result.thinking).toBe("Let me see");
    // The thought section's pieces (tokens), markers included, up to the closing one.
    expect(result.pieces).toBe(9);
    expect(result.text).toBe("Four.");
    // Nothing is given out while "<th" may still be the marker; the thought streams as it comes.
    expect(result.steps[0]).toEqual({ thinking: "", text: "" });
    expect(result.steps[3]).toEqual({ thinking: "Let", text: "" });
    expect(result.steps[4]).toEqual({ thinking: " me", text: "" });
    // "\n</" may be the closing marker: held back until "ink>" decides it.
    expect(result.steps[6]).toEqual({ thinking: "", text: "" });
    expect(result.steps[10]).toEqual({ thinking: "", text: "Four" });
  });

  it("keeps whitespace inside the thought, and text that only looks like the start of a marker", () => {
    expect(run(["<think>a\n\nb </", "b> c</think>x"])).toMatchObject({ thinking: "a\n\nb </b> c", text: "x" });
  });

  it("takes a reply that does not open with the marker as all answer, as written", () => {
    expect(run(["  Hello", " <think>x</think>"])).toMatchObject({ thinking: "", text: "  Hello <think>x</think>", raw: "", pieces: 0 });
    expect(run(["<thi", "s is text"])).toMatchObject({ thinking: "", text: "<this is text" });
    expect(run(["<thi"])).toMatchObject({ thinking: "", text: "<thi", pieces: 0 });
  });

  it("takes an unclosed thought (cut off by max_tokens) as all thought", () => {
    expect(run(["<think>\nStill", " thinking \n</thi"])).toMatchObject({ thinking: "Still thinking \n</thi", text: "", pieces: 2 });
  });

  it("starts inside the thought when the prompt opened it", () => {
    expect(run(["Hmm.\n</think>\n\nYes."], true)).toMatchObject({ thinking: "Hmm.", text: "Yes." });
  });

  it("splits Gemma 4's thought channel and Apertus's deliberation, by the markers chatFormatOf reads in their templates", () => {
    // Gemma 4's template writes `<|channel>thought\n<channel|>` to turn thinking off; Apertus's writes its `thoughts` blocks so.
    const gemma = chatFormatOf("{{- '<|channel>thought\\n<channel|>' -}}").thought!;
    expect(run(["<|channel>", "thought", "\nThe sky", "<channel|>", "Blue."], false, gemma)).toMatchObject({
      thinking: "The sky",
      text: "Blue.",
      raw: "<|channel>thought\nThe sky<channel|>",
    });
    // Thinking off: the prompt closed the channel, and the reply is all answer.
    expect(run(["Blue."], false, gemma)).toMatchObject({ thinking: "", text: "Blue." });
    const apertus = chatFormatOf("{%- set inner_token = '<|inner_prefix|>' -%}{%- set outer_token = '<|inner_suffix|>' -%}").thought!;
    expect(run(["<|inner_prefix|>", "The sky", "<|inner_suffix|>", "Blue."], false, apertus)).toMatchObject({
      thinking: "The sky",
      text: "Blue.",
    });
  });

  it("splits the same way however the text is cut into pieces", () => {
    const texts = [
      "<think>\nLet me see.\n</think>\n\nFour.",
      "  <think>a</think>b",
      "<thinking>no",
      "plain </think> text",
      "<think>\n\n</think>\n\nX",
    ];
    fc.assert(
      fc.property(fc.constantFrom(...texts), fc.array(fc.nat(60), { maxLength: 12 }), (text, positions) => {
        const whole = run([text]);
        const pieces = run(cut(text, positions));
        expect({ thinking: pieces.thinking, text: pieces.text, raw: pieces.raw }).toEqual({
          thinking: whole.thinking,
          text: whole.text,
          raw: whole.raw,
        });
      }),
    );
  });
});
