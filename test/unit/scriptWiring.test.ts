import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { makeTestModel } from "../../src/testmodels/makeTestModel.js";
import { presets, type LlamaPreset } from "../../src/testmodels/presets.js";
import { scriptText, scriptTokens } from "../../src/testmodels/scriptTokens.js";
import { planScript, previousTokenHeadMargin, stateHeadRotation, withScriptTokens } from "../../src/testmodels/scriptWiring.js";
import { testVocabulary, TokenType } from "../../src/testmodels/testVocabulary.js";

// The scripted test models' plan (steps, output weights, refusals) and files; the replies they
// write through the real engine are in test/model/scriptedModel.test.ts.

const never = () => false;

describe("scriptTokens", () => {
  it("spells text as the test vocabulary's BPE tokens, keeping markers and the vocabulary's own added tokens whole", () => {
    const tokens = scriptTokens("\n<think>The sky</think>Blue.<|im_end|>", ["<think>", "</think>"]);
    expect(tokens[0]).toBe("Ċ");
    expect(tokens.slice(1, 3)).toEqual(["<think>", "The"]);
    expect(tokens).toContain("</think>");
    expect(tokens.at(-1)).toBe("<|im_end|>");
    const known = new Set(testVocabulary().tokens);
    expect(tokens.filter((token) => !known.has(token))).toEqual(["<think>", "</think>"]);
    expect(scriptText(tokens)).toBe("\n<think>The sky</think>Blue.<|im_end|>");
  });

  it("round-trips text with multi-byte characters and the longest marker first", () => {
    const text = "Ünïcode — ☃ <|a|><|ab|> the river";
    expect(scriptText(scriptTokens(text, ["<|a|>", "<|ab|>"]))).toBe(text);
    expect(scriptTokens("<|ab|>", ["<|a", "<|ab|>"])).toEqual(["<|ab|>"]);
  });
});

describe("planScript", () => {
  it("refuses a (previous, current) pair followed by two different tokens, naming them", () => {
    // ", :" comes after "name" and after "arguments", followed by ' "' then by ' {'.
    const tokens = scriptTokens('\n{"name": "f", "arguments": {}}');
    expect(() => planScript(tokens, never)).toThrow(/tokens "\\"", ":" are followed by .* and by .*each such state may have one successor/);
  });

  it("refuses a script whose last two tokens come earlier with a successor (it would not stop) unless it ends the turn", () => {
    expect(() => planScript(["Ċ", "a", "b", "c", "a", "b"], never)).toThrow(/ends with "a", "b", which it has earlier/);
    expect(() => planScript(["Ċ", "a", "b", "c", "a", "b", "c"], never)).toThrow(/"a", "b", "c" come twice/);
    expect(() => planScript(["Ċ", "a", "b"], never)).not.toThrow();
  });

  it("lets a token come back with another successor: each target reads its steps' previous and current tokens", () => {
    const tokens = [
      "Ċ",
      "<|channel|>",
      "analysis",
      "<|message|>",
      "S",
      ".",
      "<|end|>",
      "<|start|>",
      "assistant",
      "<|channel|>",
      "final",
      "<|message|>",
      "B",
      ".",
    ];
    const { distinct, weights } = planScript(tokens, never);
    const message = weights[distinct.indexOf("<|message|>")]!;
    // <|message|> follows (<|channel|>, analysis) and (<|channel|>, final).
    expect(Object.fromEntries([...message.current].map(([i, w]) => [distinct[i], w]))).toEqual({ analysis: 1, final: 1 });
    expect(Object.fromEntries([...message.previous].map(([i, w]) => [distinct[i], w]))).toEqual({ "<|channel|>": 1 });
    expect(message.constant).toBe(-1);
    // The first step's previous token is the prompt's: its target reads the source twice.
    expect(weights[distinct.indexOf("<|channel|>")]!.current.get(0)).toBe(2);
  });

  it("refuses a script the additive logits cannot tell apart", () => {
    // X follows (a, b) and (c, d); after (a, d) the script wants Y, but X reads a and d too.
    expect(() => planScript(["Ċ", "a", "b", "X", "c", "d", "X", "a", "d", "Y"], never)).toThrow(/cannot be told apart from "X"/);
  });

  describe("state markers", () => {
    const HARMONY = ["<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|return|>"];
    // gpt-oss's reply after its generation prompt, `…<|start|>assistant` (`a ss i st an t` here):
    // the pair (t, <|channel|>) comes back, followed by `an` (analysis), then by `f` (final).
    const tokens = [
      scriptTokens("<|start|>assistant", HARMONY).at(-1)!,
      ...scriptTokens("<|channel|>analysis<|message|>The sky<|end|><|start|>assistant<|channel|>final<|message|>Blue.<|return|>", HARMONY),
    ];
    /** A target's weights by token text. */
    const weightsOf = (plan: ReturnType<typeof planScript>, token: string) => {
      const target = plan.weights[plan.distinct.indexOf(token)]!;
      const byText = (map: Map<number, number>) => Object.fromEntries([...map].map(([i, w]) => [plan.distinct[i], w]));
      return {
        current: byText(target.current),
        previous: byText(target.previous),
        seen: [...target.seen.values()],
        constant: target.constant,
      };
    };

    it("refuses the pair's two successors without one, naming the tokens first written between them", () => {
      expect(() => planScript(tokens, never)).toThrow(
        /"t", "<\|channel\|>" are followed by "an" \(token 2\) and by "f" \(token 21\).*state marker \(stateMarkers\), one the prompt lacks: "an", "al", "y", "s", "is", "<\|message\|>", "The", "Ġs", "k", "<\|end\|>", "<\|start\|>", "a", "ss", "i", "st"\.$/,
      );
    });

    it("tells them apart by whether the marker is written: each successor drops a unit on the other side of it", () => {
      const plan = planScript(tokens, never, ["The"]);
      expect(plan.stateMarkers).toEqual([plan.distinct.indexOf("The")]);
      // `f` follows (t, <|channel|>) after the thought: 1 + 1 + 1 − 2 there, 1 + 1 − 2 before it.
      expect(weightsOf(plan, "f")).toEqual({ current: { "<|channel|>": 1 }, previous: { t: 1 }, seen: [1], constant: -2 });
      // `an` follows it before the thought, and (i, st) after it, which makes up its −1 with a 2 on st.
      expect(weightsOf(plan, "an")).toEqual({
        current: { "<|channel|>": 1, st: 2 },
        previous: { t: 1, i: 1 },
        seen: [-1],
        constant: -1,
      });
      // A target written on both sides without a twin does not read the flag.
      expect(weightsOf(plan, "<|message|>").seen).toEqual([]);
    });

    it("refuses markers the flag would be wrong or useless for, and pairs a marker cannot tell apart", () => {
      expect(() => planScript(tokens, never, ["zz"])).toThrow(/"zz" is not in the script/);
      expect(() => planScript(tokens, never, ["t"])).toThrow(/"t" is the script's source, the prompt's last token/);
      expect(() => planScript(tokens, never, ["The", "The"])).toThrow(/must be distinct/);
      // Written after both: the pair still has two successors with the same flags.
      expect(() => planScript(tokens, never, ["B"])).toThrow(/are followed by "an" \(token 2\) and by "f"/);
      // (a, b) → X and (c, d) → Y before M, the other way round after it: X and Y each need the flag both ways.
      expect(() => planScript(["Ċ", "a", "b", "X", "c", "d", "Y", "M", "a", "b", "Y", "c", "d", "X", "e"], never, ["M"])).toThrow(
        /cannot be told apart/,
      );
    });

    it("read over script-tiny's whole context from a pair turning 2.18 rad: at least 0.46 of the peak score", () => {
      const rotation = stateHeadRotation(presets["script-tiny"] as LlamaPreset);
      expect(rotation.pair).toBe(31);
      expect(rotation.phase).toBeCloseTo(2.1847 / 2, 3);
      expect(rotation.floor).toBeCloseTo(0.46, 2);
    });
  });

  it("refuses a byte-level token the vocabulary lacks instead of adding it as a marker", () => {
    expect(() => withScriptTokens(testVocabulary(), { tokens: ["Ċ", "Ġzzzz"] })).toThrow(
      /not in the test vocabulary; spell text as its tokens with scriptTokens/,
    );
    const vocabulary = withScriptTokens(testVocabulary(), { tokens: ["Ċ", "<think>", "<think>"], addedTokens: ["<|call|>"] });
    expect(vocabulary.tokens.slice(testVocabulary().tokens.length)).toEqual(["<think>", "<|call|>"]);
    expect(vocabulary.tokenTypes.slice(testVocabulary().tokens.length)).toEqual([TokenType.userDefined, TokenType.userDefined]);
  });
});

describe("previous-token head", () => {
  it("singles out distance 1 over script-tiny's whole context by over 50 nats", () => {
    expect(previousTokenHeadMargin(presets["script-tiny"] as LlamaPreset)).toBeCloseTo(53.6, 1);
  });
});

describe("scripted model files", () => {
  let directory: string | undefined;
  afterAll(() => (directory ? rm(directory, { recursive: true, force: true }) : undefined));

  it("are byte-identical for the same options and differ with the script", async () => {
    directory = await mkdtemp(path.join(os.tmpdir(), "modelhost-scripted-"));
    const hash = async (name: string, reply: string) => {
      const { path: file } = await makeTestModel({
        preset: "script-tiny",
        out: path.join(directory!, name),
        script: { tokens: scriptTokens(reply) },
      });
      return createHash("sha256")
        .update(await readFile(file))
        .digest("hex");
    };
    const first = await hash("a.gguf", "\nBlue sky.<|im_end|>");
    expect(await hash("b.gguf", "\nBlue sky.<|im_end|>")).toBe(first);
    expect(await hash("c.gguf", "\nGrey sky.<|im_end|>")).not.toBe(first);
  });

  it("refuses a script the preset has no room for, and a thinking preset", async () => {
    // script-tiny has two key/value heads: the previous-token head's and one state head.
    await expect(
      makeTestModel({
        preset: "script-tiny",
        out: path.join(os.tmpdir(), "never.gguf"),
        script: { tokens: ["Ċ", "a", "b", "c"], stateMarkers: ["a", "b"] },
      }),
    ).rejects.toThrow(/has room for 1 state markers/);
    const long = scriptTokens("\nThe quick brown fox jumps over the lazy dog: 0123456789 QWERTYUIOPASDFGHJKLZXCVBNM!");
    await expect(makeTestModel({ preset: "tiny", out: path.join(os.tmpdir(), "never.gguf"), script: { tokens: long } })).rejects.toThrow(
      /too large for modelhost tiny test model/,
    );
    await expect(
      makeTestModel({ preset: "think-tiny", out: path.join(os.tmpdir(), "never.gguf"), script: { tokens: ["Ċ", "a"] } }),
    ).rejects.toThrow(/writes a thought of its own/);
  });
});
