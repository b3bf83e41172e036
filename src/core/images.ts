import { ServerError } from "./ServerError.js";

// Images are untrusted input: every one is checked here, from its bytes, before anything decodes
// its pixels. The format comes from the signature, never from what the client declares; the size
// comes from the header, which is what a decoder allocates for, so a decompression bomb (a small
// file that declares 50,000 × 50,000 pixels) is refused before any decoder runs; and a file cut
// short is refused here, because some decoders do not notice (stb_image, which llama.cpp's mtmd
// decodes with, fills a truncated JPEG's missing rows with grey and reports success).

/** The 400 for images sent to a model that has no projector to read them. */
export function noProjectorMessage(model: string): string {
  return `The model \`${model}\` does not read images: it has no vision projector (an mmproj GGUF file beside it, or named in models.json).`;
}

export const imageFormats = ["png", "jpeg", "gif", "bmp", "webp"] as const;
export type ImageFormat = (typeof imageFormats)[number];

export const IMAGE_MIME_TYPES: Readonly<Record<ImageFormat, string>> = {
  png: "image/png",
  jpeg: "image/jpeg",
  gif: "image/gif",
  bmp: "image/bmp",
  webp: "image/webp",
};

export interface ImageInfo {
  format: ImageFormat;
  width: number;
  height: number;
}

/** What a request's images may be: each at most `maxBytes` encoded and `maxPixels` decoded. */
export interface ImageLimits {
  maxBytes: number;
  maxPixels: number;
}

/** An image as it reached the engine: its bytes, checked, and what its header says. */
export interface ImageInput extends ImageInfo {
  bytes: Uint8Array;
}

const ascii = (bytes: Uint8Array, at: number, length: number): string => String.fromCharCode(...bytes.subarray(at, at + length));
const u16be = (b: Uint8Array, at: number) => (b[at]! << 8) | b[at + 1]!;
const u16le = (b: Uint8Array, at: number) => b[at]! | (b[at + 1]! << 8);
const u24le = (b: Uint8Array, at: number) => b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16);
const u32be = (b: Uint8Array, at: number) => ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
const u32le = (b: Uint8Array, at: number) => (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24)) >>> 0;
const i32le = (b: Uint8Array, at: number) => b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24);

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const CUT_SHORT = "it is cut short (the file ends before its last";

/**
 * An image's format and size from its header, having checked that the file is whole: its
 * structure is walked to its end marker (PNG's chunks to IEND, JPEG's segments to its scan and EOI,
 * GIF's blocks to its trailer, BMP's and WebP's declared lengths), without decoding pixels. Or
 * why it is not an image we take, as the end of a sentence ("… is not accepted: <reason>").
 */
export function inspectImage(bytes: Uint8Array): ImageInfo | { refused: string } {
  const info = readImage(bytes);
  if ("refused" in info) return info;
  if (info.width === 0 || info.height === 0) return { refused: `its header gives it no pixels (${info.width} × ${info.height})` };
  return info;
}

function readImage(b: Uint8Array): ImageInfo | { refused: string } {
  if (b.length >= 8 && PNG_SIGNATURE.every((byte, i) => b[i] === byte)) return readPng(b);
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return readJpeg(b);
  if (b.length >= 6 && (ascii(b, 0, 6) === "GIF87a" || ascii(b, 0, 6) === "GIF89a")) return readGif(b);
  if (b.length >= 2 && ascii(b, 0, 2) === "BM") return readBmp(b);
  if (b.length >= 12 && ascii(b, 0, 4) === "RIFF" && ascii(b, 8, 4) === "WEBP") return readWebp(b);
  if (looksLikeSvg(b)) return { refused: "SVG is not an image format models read; send PNG, JPEG, GIF, BMP or WebP" };
  return { refused: "it is not a PNG, JPEG, GIF, BMP or WebP image" };
}

function looksLikeSvg(b: Uint8Array): boolean {
  const head = ascii(b, 0, Math.min(b.length, 512))
    .replace(/^\uFEFF|^\xEF\xBB\xBF/, "")
    .trimStart()
    .toLowerCase();
  return head.startsWith("<svg") || (head.startsWith("<?xml") && head.includes("<svg")) || head.startsWith("<!doctype svg");
}

function readPng(b: Uint8Array): ImageInfo | { refused: string } {
  // Chunks: length (4, big-endian), type (4), data, CRC (4); IHDR first, IEND last.
  let at = 8;
  let size: { width: number; height: number } | undefined;
  while (at + 8 <= b.length) {
    const length = u32be(b, at);
    const type = ascii(b, at + 4, 4);
    if (at === 8) {
      if (type !== "IHDR" || length !== 13) return { refused: "it is not a valid PNG (its first chunk is not a header)" };
      if (at + 8 + 13 > b.length) break;
      size = { width: u32be(b, at + 8), height: u32be(b, at + 12) };
    }
    const next = at + 12 + length;
    if (next > b.length) break;
    if (type === "IEND") return { format: "png", ...size! };
    at = next;
  }
  return { refused: `${CUT_SHORT} chunk, IEND)` };
}

function readJpeg(b: Uint8Array): ImageInfo | { refused: string } {
  // Segments: 0xFF, a marker, and (but for RSTn, SOI, EOI, TEM) a big-endian length that counts
  // itself. The size is in the frame header (SOFn); after the scan (SOS) comes entropy-coded data,
  // where 0xFF is always followed by 0x00 or a restart marker, so the first 0xFF 0xD9 after it
  // ends the image (a thumbnail's own EOI, inside an APP1 segment, comes before).
  let at = 2;
  let size: { width: number; height: number } | undefined;
  while (at + 4 <= b.length) {
    if (b[at] !== 0xff) return { refused: "it is not a valid JPEG (a segment does not start with a marker)" };
    const marker = b[at + 1]!;
    if (marker === 0xff) {
      at++; // fill byte
      continue;
    }
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      at += 2;
      continue;
    }
    if (marker === 0xd9) break; // EOI before any scan
    const length = u16be(b, at + 2);
    if (length < 2) return { refused: "it is not a valid JPEG (a segment's length is wrong)" };
    const isFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isFrame) {
      if (at + 9 > b.length) break;
      size = { height: u16be(b, at + 5), width: u16be(b, at + 7) };
    }
    if (marker === 0xda) {
      if (!size) return { refused: "it is not a valid JPEG (its scan comes before its frame header)" };
      for (let i = at + 2 + length; i + 1 < b.length; i++) if (b[i] === 0xff && b[i + 1] === 0xd9) return { format: "jpeg", ...size };
      break;
    }
    at += 2 + length;
  }
  return { refused: `${CUT_SHORT} marker, EOI)` };
}

function readGif(b: Uint8Array): ImageInfo | { refused: string } {
  if (b.length < 13) return { refused: `${CUT_SHORT} byte of its header)` };
  const size = { width: u16le(b, 6), height: u16le(b, 8) };
  const flags = b[10]!;
  let at = 13 + (flags & 0x80 ? 3 << ((flags & 7) + 1) : 0);
  // Blocks: images (0x2C: a descriptor, a local colour table, LZW data in sub-blocks) and
  // extensions (0x21: a label, sub-blocks), to the trailer (0x3B).
  const skipSubBlocks = (from: number): number => {
    let i = from;
    while (i < b.length && b[i] !== 0) i += b[i]! + 1;
    return i + 1;
  };
  while (at < b.length) {
    const block = b[at]!;
    if (block === 0x3b) return { format: "gif", ...size };
    if (block === 0x21) at = skipSubBlocks(at + 2);
    else if (block === 0x2c) {
      if (at + 10 > b.length) break;
      const local = b[at + 9]!;
      at = skipSubBlocks(at + 10 + (local & 0x80 ? 3 << ((local & 7) + 1) : 0) + 1);
    } else return { refused: "it is not a valid GIF (an unknown block)" };
  }
  return { refused: `${CUT_SHORT} block, its trailer)` };
}

function readBmp(b: Uint8Array): ImageInfo | { refused: string } {
  if (b.length < 26) return { refused: `${CUT_SHORT} byte of its header)` };
  const declared = u32le(b, 2);
  if (declared > b.length) return { refused: `${CUT_SHORT} of the ${declared} bytes its header declares)` };
  const headerSize = u32le(b, 14);
  // The old OS/2 header (12 bytes) has 16-bit sizes; the others 32-bit, the height negative for top-down rows.
  if (headerSize === 12) return { format: "bmp", width: u16le(b, 18), height: u16le(b, 20) };
  if (headerSize < 40) return { refused: "it is not a valid BMP (an unknown header)" };
  return { format: "bmp", width: Math.abs(i32le(b, 18)), height: Math.abs(i32le(b, 22)) };
}

function readWebp(b: Uint8Array): ImageInfo | { refused: string } {
  const declared = u32le(b, 4) + 8;
  if (declared > b.length) return { refused: `${CUT_SHORT} of the ${declared} bytes its header declares)` };
  if (b.length < 30) return { refused: `${CUT_SHORT} byte of its header)` };
  const chunk = ascii(b, 12, 4);
  if (chunk === "VP8X") return { format: "webp", width: u24le(b, 24) + 1, height: u24le(b, 27) + 1 };
  if (chunk === "VP8L") {
    if (b[20] !== 0x2f) return { refused: "it is not a valid WebP (a lossless stream without its signature)" };
    const bits = u32le(b, 21);
    return { format: "webp", width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
  }
  if (chunk === "VP8 ") {
    if (b[23] !== 0x9d || b[24] !== 0x01 || b[25] !== 0x2a)
      return { refused: "it is not a valid WebP (a lossy frame without its start code)" };
    return { format: "webp", width: u16le(b, 26) & 0x3fff, height: u16le(b, 28) & 0x3fff };
  }
  return { refused: "it is not a valid WebP (an unknown first chunk)" };
}

/**
 * Decodes base64 strictly: the standard alphabet, padding only at the end, whitespace ignored
 * (Node's decoder skips any other character silently, which would turn a corrupted upload into
 * another image). Refuses before decoding a text longer than `maxBytes` would take.
 */
export function decodeBase64(text: string, maxBytes: number): Uint8Array | { refused: string } {
  const clean = /\s/.test(text) ? text.replace(/\s+/g, "") : text;
  if (Math.floor((clean.length * 3) / 4) - 2 > maxBytes) return { refused: tooLarge(Math.floor((clean.length * 3) / 4), maxBytes) };
  if (clean.length % 4 === 1 || !/^[A-Za-z0-9+/]*={0,2}$/.test(clean)) return { refused: "it is not valid base64" };
  return new Uint8Array(Buffer.from(clean, "base64"));
}

function tooLarge(bytes: number, maxBytes: number): string {
  return `it is about ${sizeText(bytes)}, and images may be at most ${sizeText(maxBytes)} (--max-image-bytes)`;
}

function sizeText(bytes: number): string {
  return bytes < 1048576 ? `${Math.ceil(bytes / 1024)} KiB` : `${(bytes / 1048576).toFixed(1)} MiB`;
}

/** A `data:` URL's declared media type and bytes (base64 only; images are binary). */
export function parseDataUrl(url: string, maxBytes: number): { mediaType: string; bytes: Uint8Array } | { refused: string } {
  const match = /^data:([^;,]*)((?:;[^;,]*)*),/i.exec(url);
  if (!match) return { refused: "it is not a data URL (data:image/png;base64,…)" };
  const parameters = match[2]!.toLowerCase().split(";");
  if (!parameters.includes("base64")) return { refused: "a data URL of an image must be base64-encoded (;base64,)" };
  const bytes = decodeBase64(url.slice(match[0].length), maxBytes);
  return "refused" in bytes ? bytes : { mediaType: match[1]!.trim().toLowerCase(), bytes };
}

/**
 * Checks an image from a request against `limits` and against the media type the client declared
 * (when it declared one): a 400 naming `param` if it is not an image we take. What a client
 * declares must agree with the bytes: `image/jpg` is taken for JPEG, as clients send it.
 */
export function checkImage(bytes: Uint8Array, declared: string | undefined, limits: ImageLimits, param: string): ImageInput {
  const refuse = (reason: string) =>
    new ServerError("invalid_request", { param, message: `Invalid value for '${param}': the image is not accepted: ${reason}.` });
  if (bytes.length > limits.maxBytes) throw refuse(tooLarge(bytes.length, limits.maxBytes));
  const info = inspectImage(bytes);
  if ("refused" in info) throw refuse(info.refused);
  const mediaType = declared === "image/jpg" ? "image/jpeg" : declared;
  if (mediaType !== undefined && mediaType !== "" && mediaType !== IMAGE_MIME_TYPES[info.format]) {
    throw refuse(`it is declared as ${declared}, but its bytes are a ${info.format.toUpperCase()} image`);
  }
  if (info.width * info.height > limits.maxPixels) {
    throw refuse(
      `it is ${info.width} × ${info.height} pixels, more than the ${limits.maxPixels.toLocaleString("en-US")} an image may have (--max-image-pixels)`,
    );
  }
  return { ...info, bytes };
}
