import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkImage, decodeBase64, inspectImage, parseDataUrl, type ImageLimits } from "../../src/core/images.js";
import { ServerError } from "../../src/core/ServerError.js";
import { encodeBmp, encodeGif, encodePng, jpegShell, pngBomb, webpShell, type Rgb } from "../support/images.js";

const checker: (x: number, y: number) => Rgb = (x, y) => ((x + y) % 2 ? [255, 255, 255] : [10, 20, 30]);
const limits: ImageLimits = { maxBytes: 1 << 20, maxPixels: 1 << 20 };

/** Each format, whole, with the size its header gives. */
const samples = [
  { format: "png", bytes: encodePng(33, 17, checker) },
  { format: "jpeg", bytes: jpegShell(640, 480) },
  { format: "gif", bytes: encodeGif(21, 9, [200, 0, 0]) },
  { format: "bmp", bytes: encodeBmp(13, 7, checker) },
  { format: "webp", bytes: webpShell(300, 200) },
] as const;
const sizes = { png: [33, 17], jpeg: [640, 480], gif: [21, 9], bmp: [13, 7], webp: [300, 200] };

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ServerError);
    expect((error as ServerError).code).toBe("invalid_request");
    return (error as ServerError).message;
  }
  throw new Error("it was not refused");
}

describe("image checks, from the bytes, before any decoder", () => {
  it("reads each format's size from its header, whatever the client declared", () => {
    for (const { format, bytes } of samples) {
      const [width, height] = sizes[format];
      expect(inspectImage(bytes)).toEqual({ format, width, height });
      expect(checkImage(bytes, undefined, limits, "image")).toMatchObject({ format, width, height, bytes });
    }
    // Clients send image/jpg for JPEG.
    expect(checkImage(samples[1].bytes, "image/jpg", limits, "image").format).toBe("jpeg");
  });

  it("refuses every file cut short, at every length, as cut short", () => {
    for (const { format, bytes } of samples) {
      for (let length = 0; length < bytes.length; length++) {
        const result = inspectImage(bytes.subarray(0, length));
        expect(result, `${format} cut to ${length} of ${bytes.length} bytes`).toHaveProperty("refused");
      }
      // Past the magic bytes, the reason names the cut.
      expect(inspectImage(bytes.subarray(0, bytes.length - 1))).toEqual({ refused: expect.stringMatching(/cut short/) as string });
    }
  });

  it("refuses a decompression bomb by its declared size, before decoding: a few KiB declaring 2.5 billion pixels", () => {
    const bomb = pngBomb(50_000, 50_000);
    expect(bomb.length).toBeLessThan(8192);
    expect(refusal(() => checkImage(bomb, "image/png", limits, "messages[0].content[1].image_url"))).toBe(
      "Invalid value for 'messages[0].content[1].image_url': the image is not accepted: it is 50000 × 50000 pixels, more than the 1,048,576 an image may have (--max-image-pixels).",
    );
  });

  it("refuses SVG, other files, a wrong media type, and an image over the size limit", () => {
    const svg = Buffer.from('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>');
    expect(refusal(() => checkImage(svg, "image/svg+xml", limits, "image"))).toMatch(/SVG is not an image format models read/);
    expect(refusal(() => checkImage(Buffer.from("  <svg></svg>"), undefined, limits, "image"))).toMatch(/SVG/);
    expect(refusal(() => checkImage(Buffer.from("%PDF-1.7\n"), undefined, limits, "image"))).toMatch(
      /not a PNG, JPEG, GIF, BMP or WebP image/,
    );
    expect(refusal(() => checkImage(samples[0].bytes, "image/jpeg", limits, "image"))).toMatch(
      /declared as image\/jpeg, but its bytes are a PNG image/,
    );
    const big = encodePng(1024, 1024, () => [1, 2, 3]);
    expect(refusal(() => checkImage(big, undefined, { maxBytes: 1000, maxPixels: 1 << 24 }, "image"))).toMatch(
      /it is about \d+ KiB, and images may be at most 1 KiB \(--max-image-bytes\)/,
    );
    expect(
      refusal(() =>
        checkImage(
          encodePng(4, 0, () => [0, 0, 0]),
          undefined,
          limits,
          "image",
        ),
      ),
    ).toMatch(/no pixels \(4 × 0\)/);
  });

  it("never throws on arbitrary bytes, whole or as the start of an image", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 256 }), fc.constantFrom(...samples), fc.nat(), (noise, sample, cut) => {
        for (const bytes of [noise, Buffer.concat([sample.bytes.subarray(0, cut % sample.bytes.length), noise])]) {
          const result = inspectImage(bytes);
          if (!("refused" in result)) expect(result.width * result.height).toBeGreaterThan(0);
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe("base64 and data URLs", () => {
  it("decodes strict base64, with whitespace, and refuses other characters rather than skipping them", () => {
    const png = samples[0].bytes;
    const text = png.toString("base64");
    expect(Buffer.from(decodeBase64(text, limits.maxBytes) as Uint8Array)).toEqual(png);
    expect(Buffer.from(decodeBase64(text.replace(/(.{60})/g, "$1\n"), limits.maxBytes) as Uint8Array)).toEqual(png);
    expect(decodeBase64(`${text.slice(0, 10)}*${text.slice(10)}`, limits.maxBytes)).toEqual({ refused: "it is not valid base64" });
    expect(decodeBase64("QUJDA", limits.maxBytes)).toEqual({ refused: "it is not valid base64" });
    expect(decodeBase64("QQ==QUJD", limits.maxBytes)).toEqual({ refused: "it is not valid base64" });
    // Too long is refused from the length, before decoding.
    expect(decodeBase64("A".repeat(4000), 1000)).toEqual({
      refused: "it is about 3 KiB, and images may be at most 1 KiB (--max-image-bytes)",
    });
  });

  it("parses base64 data URLs and their media type, and nothing else", () => {
    const png = samples[0].bytes;
    const parsed = parseDataUrl(`data:Image/PNG;base64,${png.toString("base64")}`, limits.maxBytes);
    expect(parsed).toMatchObject({ mediaType: "image/png" });
    expect(Buffer.from((parsed as { bytes: Uint8Array }).bytes)).toEqual(png);
    expect(parseDataUrl(`data:;base64,${png.toString("base64")}`, limits.maxBytes)).toMatchObject({ mediaType: "" });
    expect(parseDataUrl("data:image/png,%89PNG", limits.maxBytes)).toEqual({
      refused: "a data URL of an image must be base64-encoded (;base64,)",
    });
    expect(parseDataUrl("https://example.com/cat.png", limits.maxBytes)).toHaveProperty("refused");
  });
});
