// Images made in the tests, byte by byte: PNG and BMP that any decoder reads (stb_image, which
// llama.cpp's mtmd uses, included), a GIF of one colour, and JPEG and WebP files whose structure
// is right (segments, chunks, end markers) around data that is not a real picture: enough for
// checks that read headers and structure, not for a decoder.
import { deflateSync } from "node:zlib";

export type Rgb = readonly [number, number, number];

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of bytes) crc = CRC_TABLE[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function u32be(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(value >>> 0);
  return b;
}

function pngChunk(type: string, data: Uint8Array): Buffer {
  const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
  return Buffer.concat([u32be(data.length), body, u32be(crc32(body))]);
}

/** An RGB PNG of `width` × `height`, each pixel `pixel(x, y)`. */
export function encodePng(width: number, height: number, pixel: (x: number, y: number) => Rgb): Buffer {
  const rows = Buffer.alloc(height * (1 + width * 3));
  for (let y = 0; y < height; y++) {
    const row = y * (1 + width * 3);
    for (let x = 0; x < width; x++) rows.set(pixel(x, y), row + 1 + x * 3);
  }
  const header = Buffer.concat([u32be(width), u32be(height), Buffer.from([8, 2, 0, 0, 0])]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk("IHDR", header),
    pngChunk("IDAT", deflateSync(rows)),
    pngChunk("IEND", new Uint8Array(0)),
  ]);
}

/**
 * A decompression bomb: a PNG whose header declares `width` × `height` pixels, with a few
 * kilobytes of compressed zero rows that would inflate to them.
 */
export function pngBomb(width: number, height: number): Buffer {
  const header = Buffer.concat([u32be(width), u32be(height), Buffer.from([8, 2, 0, 0, 0])]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk("IHDR", header),
    pngChunk("IDAT", deflateSync(Buffer.alloc(1 << 20))),
    pngChunk("IEND", new Uint8Array(0)),
  ]);
}

/** A 24-bit BMP of `width` × `height`, bottom-up rows padded to 4 bytes. */
export function encodeBmp(width: number, height: number, pixel: (x: number, y: number) => Rgb): Buffer {
  const stride = Math.ceil((width * 3) / 4) * 4;
  const data = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) {
      const [r, g, b] = pixel(x, height - 1 - y);
      data.set([b, g, r], y * stride + x * 3);
    }
  const header = Buffer.alloc(54);
  header.write("BM", 0, "ascii");
  header.writeUInt32LE(54 + data.length, 2);
  header.writeUInt32LE(54, 10);
  header.writeUInt32LE(40, 14);
  header.writeInt32LE(width, 18);
  header.writeInt32LE(height, 22);
  header.writeUInt16LE(1, 26);
  header.writeUInt16LE(24, 28);
  header.writeUInt32LE(data.length, 34);
  return Buffer.concat([header, data]);
}

/** A GIF of `width` × `height` in one colour (a 2-entry palette, every pixel index 0). */
export function encodeGif(width: number, height: number, [r, g, b]: Rgb): Buffer {
  // LZW with a 2-bit minimum code size: codes of 3 bits, clear (4) and end (5); a stream of only
  // clear codes and index 0, re-cleared before the table grows past 3-bit codes.
  const codes: number[] = [];
  for (let i = 0; i < width * height; i++) {
    if (i % 2 === 0) codes.push(4);
    codes.push(0);
  }
  codes.push(5);
  const packed: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const code of codes) {
    acc |= code << bits;
    bits += 3;
    while (bits >= 8) {
      packed.push(acc & 0xff);
      acc >>= 8;
      bits -= 8;
    }
  }
  if (bits > 0) packed.push(acc & 0xff);
  const subBlocks: number[] = [];
  for (let at = 0; at < packed.length; at += 255) {
    const block = packed.slice(at, at + 255);
    subBlocks.push(block.length, ...block);
  }
  const size = (n: number) => [n & 0xff, n >> 8];
  return Buffer.from([
    ...Buffer.from("GIF89a", "ascii"),
    ...size(width),
    ...size(height),
    0x80, // a global colour table of 2 entries
    0,
    0,
    r,
    g,
    b,
    0,
    0,
    0,
    0x2c,
    0,
    0,
    0,
    0,
    ...size(width),
    ...size(height),
    0,
    2, // LZW minimum code size
    ...subBlocks,
    0,
    0x3b,
  ]);
}

/** A JPEG's structure (SOI, APP0, DQT, SOF0 with the size, DHT, SOS, scan bytes, EOI); not decodable. */
export function jpegShell(width: number, height: number): Buffer {
  const segment = (marker: number, body: number[]) => [0xff, marker, (body.length + 2) >> 8, (body.length + 2) & 0xff, ...body];
  return Buffer.from([
    0xff,
    0xd8,
    ...segment(0xe0, [...Buffer.from("JFIF\0", "ascii"), 1, 1, 0, 0, 1, 0, 1, 0, 0]),
    ...segment(0xdb, [0, ...new Array<number>(64).fill(1)]),
    ...segment(0xc0, [8, height >> 8, height & 0xff, width >> 8, width & 0xff, 1, 1, 0x11, 0]),
    ...segment(0xc4, [0, ...new Array<number>(16).fill(0)]),
    ...segment(0xda, [1, 1, 0, 0, 63, 0]),
    0x12,
    0xff,
    0x00,
    0x34,
    0xff,
    0xd0,
    0x56,
    0xff,
    0xd9,
  ]);
}

/** A lossless WebP's structure (RIFF, VP8L with its signature and size); not decodable. */
export function webpShell(width: number, height: number): Buffer {
  const bits = ((width - 1) & 0x3fff) | (((height - 1) & 0x3fff) << 14);
  const vp8l = Buffer.alloc(10);
  vp8l[0] = 0x2f;
  vp8l.writeUInt32LE(bits >>> 0, 1);
  const chunk = Buffer.concat([Buffer.from("VP8L", "ascii"), Buffer.from([vp8l.length, 0, 0, 0]), vp8l]);
  const riff = Buffer.alloc(12);
  riff.write("RIFF", 0, "ascii");
  riff.writeUInt32LE(4 + chunk.length, 4);
  riff.write("WEBP", 8, "ascii");
  return Buffer.concat([riff, chunk]);
}
