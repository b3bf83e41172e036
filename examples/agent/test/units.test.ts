// The pure parts: the arithmetic parser, the chunker, score bands and the time tool.
import { describe, expect, it } from "vitest";
import { calculate } from "../src/calculator.js";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { chunkText } from "../src/chunking.js";
import { describeConfig, loadConfig, readEnvironment } from "../src/config.js";
import { band } from "../src/retrieval.js";
import { currentTime } from "../src/tools.js";
import { mediaTypeOf } from "../src/images.js";
import { encodeBmp, encodeGif, encodePng, jpegShell, webpShell } from "../../../test/support/images.js";

describe("calculate", () => {
  it.each([
    ["17 + 25", 42],
    ["2 + 3 * 4", 14],
    ["(2 + 3) * 4", 20],
    ["2 ^ 3 ^ 2", 512],
    ["-2 ^ 2", 4],
    ["10 % 4 - -1", 3],
    ["1.5e3 / .5", 3000],
    ["sqrt(16) + max(1, 7, 3) + round(pi)", 14],
  ])("%s = %d", (expression, value) => {
    expect(calculate(expression)).toBe(value);
  });

  it.each([
    ["2 +* 3", /unexpected "\*" at position 4/],
    ["(1 + 2", /expected "\)" at position 7/],
    ["process.exit(1)", /unknown name "process"/],
    ["constructor", /unknown name "constructor"/],
    ["__proto__(1)", /unknown name "__proto__"/],
    ["1 / 0", /not a finite number/],
    ["(".repeat(60) + "1" + ")".repeat(60), /nested too deeply/],
    ["-".repeat(60) + "1", /nested too deeply/],
    ["1+".repeat(300) + "1", /longer than 500 characters/],
  ])("refuses %s", (expression, message) => {
    expect(() => calculate(expression)).toThrow(message);
  });
});

describe("chunkText", () => {
  const sentences = Array.from({ length: 30 }, (_, i) => `Sentence number ${i} is here.`);
  const text = [sentences.slice(0, 10).join(" "), sentences.slice(10, 20).join(" "), sentences.slice(20).join(" ")].join("\n\n");

  it("cuts on sentence and paragraph boundaries, within the size, with overlapping whole sentences", () => {
    const chunks = chunkText(text, { maxChars: 200, overlapChars: 60 });
    expect(chunks.length).toBeGreaterThan(3);
    for (const chunk of chunks) {
      expect(chunk.length).toBeLessThanOrEqual(200);
      expect(chunk).toMatch(/^Sentence number \d+ is here\.[\s\S]*Sentence number \d+ is here\.$/);
    }
    for (const [i, chunk] of chunks.slice(1).entries()) {
      const firstSentence = /^Sentence number \d+ is here\./.exec(chunk)![0];
      expect(chunks[i]).toContain(firstSentence); // the overlap: it ended the previous chunk
    }
    // Every sentence is in some chunk; paragraphs stay separated by a blank line.
    for (const sentence of sentences) expect(chunks.some((chunk) => chunk.includes(sentence))).toBe(true);
    expect(chunks.some((chunk) => chunk.includes("9 is here.\n\nSentence number 10"))).toBe(true);
  });

  it("keeps a short text whole, and cuts an over-long sentence at spaces", () => {
    expect(chunkText("One line.\r\n\r\nTwo.")).toEqual(["One line.\n\nTwo."]);
    const long = "word ".repeat(100).trim();
    const chunks = chunkText(long, { maxChars: 120, overlapChars: 0 });
    expect(chunks.every((chunk) => chunk.length <= 120 && !chunk.startsWith(" "))).toBe(true);
    expect(chunks.join(" ")).toBe(long);
  });
});

describe("bands and the time tool", () => {
  it("bands scores: above 0.85 very strong, 0.70 to 0.85 related, below weak", () => {
    expect([0.9, 0.8501, 0.85, 0.75, 0.7, 0.6999].map(band)).toEqual([
      "very strong",
      "very strong",
      "related",
      "related",
      "related",
      "weak",
    ]);
  });

  it("gives the time in an IANA zone, and refuses a name that is not one", () => {
    const now = new Date("2026-07-01T12:00:00Z");
    expect(currentTime("Asia/Kolkata", now)).toEqual({
      time_zone: "Asia/Kolkata",
      local: "2026-07-01 17:30:00",
      offset: "GMT+05:30",
      weekday: "Wednesday",
      utc: "2026-07-01T12:00:00.000Z",
    });
    expect(() => currentTime("Mars/Olympus_Mons", now)).toThrow(RangeError);
  });
});

describe("image formats", () => {
  it("reads an image's media type from its first bytes, whatever its name says", () => {
    const red = () => [255, 0, 0] as const;
    expect(mediaTypeOf(encodePng(2, 2, red))).toBe("image/png");
    expect(mediaTypeOf(jpegShell(2, 2))).toBe("image/jpeg");
    expect(mediaTypeOf(encodeGif(2, 2, [255, 0, 0]))).toBe("image/gif");
    expect(mediaTypeOf(webpShell(2, 2))).toBe("image/webp");
    expect(mediaTypeOf(encodeBmp(2, 2, red))).toBe("image/bmp");
    expect(mediaTypeOf(Buffer.from("RIFF0000WAVEfmt "))).toBeUndefined();
    expect(mediaTypeOf(Buffer.from("# a Markdown file"))).toBeUndefined();
    expect(mediaTypeOf(new Uint8Array())).toBeUndefined();
  });
});

describe("configuration", () => {
  it("reads .env under the environment, which wins, and never shows the key", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agent-env-"));
    try {
      const envFile = path.join(dir, ".env");
      fs.writeFileSync(
        envFile,
        "OPENAI_API_KEY=sk-from-file-secret\nAGENT_CHAT_MODEL=from-file\nAGENT_EMBEDDING_MODEL=embed\nAGENT_THRESHOLD=0.8\n",
      );
      const config = loadConfig(readEnvironment(envFile, { AGENT_CHAT_MODEL: "from-env" }));
      expect(config).toMatchObject({
        apiKey: "sk-from-file-secret",
        chatModel: "from-env",
        embeddingModel: "embed",
        threshold: 0.8,
        port: 3000,
        maxRounds: 5,
      });
      expect(describeConfig(config)).not.toContain("sk-from-file-secret");
      expect(() => loadConfig(readEnvironment(envFile, { AGENT_THRESHOLD: "high" }))).toThrow('AGENT_THRESHOLD="high" is not valid.');
      expect(() => loadConfig({ AGENT_CHAT_MODEL: "x" })).toThrow(/OPENAI_API_KEY is not set/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
