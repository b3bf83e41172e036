import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readGgufFileInfo } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GgmlType, GgufWriter } from "../../src/gguf/GgufWriter.js";
import type { GgufTensor } from "../../src/gguf/GgufWriter.js";
import { float16BitsToNumber, quantizeQ8_0 } from "../../src/gguf/quantizeQ8_0.js";

let directory: string;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "gguf-writer-"));
});

afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

const ramp = (length: number, scale: number) => Float32Array.from({ length }, (_, i) => (i - length / 2) * scale);

const tensors: GgufTensor[] = [
  { name: "vector.f32", dims: [5], type: "F32", values: () => Float32Array.from([1, -2.5, 0.1, 3e38, -0]) },
  { name: "matrix.f16", dims: [3, 2], type: "F16", values: () => Float32Array.from([0, 1, -1, 0.5, 65504, 1 / 3]) },
  { name: "matrix.q8_0", dims: [64, 3], type: "Q8_0", values: () => ramp(192, 0.01) },
  { name: "cube.f32", dims: [2, 2, 2], type: "F32", values: () => ramp(8, 1) },
];

function writerWithEverything(alignment?: number): GgufWriter {
  const writer = new GgufWriter({ alignment });
  writer
    .set("general.architecture", { type: "string", value: "test" })
    .set("test.uint8", { type: "uint8", value: 255 })
    .set("test.int8", { type: "int8", value: -128 })
    .set("test.uint16", { type: "uint16", value: 65535 })
    .set("test.int16", { type: "int16", value: -32768 })
    .set("test.uint32", { type: "uint32", value: 4_294_967_295 })
    .set("test.int32", { type: "int32", value: -2_147_483_648 })
    .set("test.uint64", { type: "uint64", value: 18_446_744_073_709_551_615n })
    .set("test.int64", { type: "int64", value: -9_223_372_036_854_775_808n })
    .set("test.float32", { type: "float32", value: 0.1 })
    .set("test.float64", { type: "float64", value: 0.1 })
    .set("test.bool_true", { type: "bool", value: true })
    .set("test.bool_false", { type: "bool", value: false })
    .set("test.string", { type: "string", value: "héllo 👋\nworld" })
    .set("test.empty_string", { type: "string", value: "" })
    .set("test.array.int32", { type: "array", itemType: "int32", values: [1, -2, 3] })
    .set("test.array.float32", { type: "array", itemType: "float32", values: [0.5, -1.25] })
    .set("test.array.uint64", { type: "array", itemType: "uint64", values: [0n, 2n ** 63n] })
    .set("test.array.bool", { type: "array", itemType: "bool", values: [true, false] })
    .set("test.array.string", { type: "array", itemType: "string", values: ["a", "", "Ġthe", "<|im_end|>"] })
    .set("test.array.empty", { type: "array", itemType: "uint8", values: [] });
  for (const tensor of tensors) writer.addTensor(tensor);
  return writer;
}

describe("GgufWriter", () => {
  it("writes metadata of every value type that node-llama-cpp's GGUF parser reads back", async () => {
    const path = join(directory, "everything.gguf");
    await writerWithEverything().write(path);

    const { version, metadata } = await readGgufFileInfo(path, { logWarnings: false });
    expect(version).toBe(3);
    expect(metadata.general.architecture).toBe("test");
    expect((metadata as unknown as { test: unknown }).test).toEqual({
      uint8: 255,
      int8: -128,
      uint16: 65535,
      int16: -32768,
      uint32: 4_294_967_295,
      int32: -2_147_483_648,
      uint64: 18_446_744_073_709_551_615n,
      int64: -9_223_372_036_854_775_808n,
      float32: Math.fround(0.1),
      float64: 0.1,
      bool_true: true,
      bool_false: false,
      string: "héllo 👋\nworld",
      empty_string: "",
      array: {
        int32: [1, -2, 3],
        float32: [0.5, -1.25],
        uint64: [0n, 2n ** 63n],
        bool: [true, false],
        string: ["a", "", "Ġthe", "<|im_end|>"],
        empty: [],
      },
    });
  });

  it("starts with the GGUF magic and version 3", async () => {
    const path = join(directory, "header.gguf");
    await writerWithEverything().write(path);
    const header = (await readFile(path)).subarray(0, 24);
    expect(header.toString("ascii", 0, 4)).toBe("GGUF");
    expect(header.readUInt32LE(4)).toBe(3);
    expect(header.readBigUInt64LE(8)).toBe(BigInt(tensors.length));
    expect(header.readBigUInt64LE(16)).toBe(21n);
  });

  it.each([32, 64])("lays out tensors at aligned offsets with their encoded data (alignment %i)", async (alignment) => {
    const path = join(directory, `tensors-${alignment}.gguf`);
    const writer = writerWithEverything(alignment);
    const bytes = await writer.write(path);
    const file = await readFile(path);
    const info = await readGgufFileInfo(path, { logWarnings: false });

    expect(bytes).toBe(file.length);
    expect(writer.parameterCount).toBe(5 + 6 + 192 + 8);
    expect(info.metadata.general.alignment).toBe(alignment === 32 ? undefined : alignment);
    expect(info.tensorInfo?.map(({ name, dimensions, ggmlType }) => ({ name, dimensions, ggmlType }))).toEqual([
      { name: "vector.f32", dimensions: [5], ggmlType: GgmlType.F32 },
      { name: "matrix.f16", dimensions: [3, 2], ggmlType: GgmlType.F16 },
      { name: "matrix.q8_0", dimensions: [64, 3], ggmlType: GgmlType.Q8_0 },
      { name: "cube.f32", dimensions: [2, 2, 2], ggmlType: GgmlType.F32 },
    ]);

    const [f32, f16, q8, cube] = (info.tensorInfo ?? []).map((tensor) => Number(tensor.fileOffset));
    // llama.cpp insists each offset is the previous tensor's end padded to the alignment.
    const padded = (size: number) => Math.ceil(size / alignment) * alignment;
    const sizes = [5 * 4, 6 * 2, 6 * 34, 8 * 4];
    const offsets = sizes.map((_, i) => sizes.slice(0, i).reduce((sum, size) => sum + padded(size), 0));
    expect(info.tensorInfo?.map((tensor) => Number(tensor.offset))).toEqual(offsets);
    for (const offset of [f32, f16, q8, cube]) expect((offset ?? -1) % alignment).toBe(0);

    const floats = (offset = 0, count: number) => Array.from({ length: count }, (_, i) => file.readFloatLE(offset + i * 4));
    expect(floats(f32, 5)).toEqual([1, -2.5, Math.fround(0.1), Math.fround(3e38), -0]);
    const halves = Array.from({ length: 6 }, (_, i) => float16BitsToNumber(file.readUInt16LE((f16 ?? 0) + i * 2)));
    expect(halves).toEqual([0, 1, -1, 0.5, 65504, float16BitsToNumber(0x3555)]);
    expect(file.subarray(q8, (q8 ?? 0) + 6 * 34)).toEqual(Buffer.from(quantizeQ8_0(ramp(192, 0.01))));
    expect(floats(cube, 8)).toEqual([...ramp(8, 1)]);
    expect(file.length).toBe((cube ?? 0) + alignment);
    expect((await stat(path)).size % alignment).toBe(0);
  });

  it("rejects what llama.cpp would refuse to load", () => {
    const writer = new GgufWriter().set("a.key", { type: "uint32", value: 1 });
    const tensor = { name: "t", dims: [32], type: "F32", values: () => new Float32Array(32) } as const;
    writer.addTensor(tensor);

    expect(() => writer.set("a.key", { type: "uint32", value: 2 })).toThrow(/Duplicate/);
    expect(() => writer.set("general.alignment", { type: "uint32", value: 64 })).toThrow(/alignment option/);
    expect(() => writer.addTensor(tensor)).toThrow(/Duplicate/);
    expect(() => writer.addTensor({ ...tensor, name: "q", type: "Q8_0", dims: [16, 2] })).toThrow(/multiple of 32/);
    expect(() => writer.addTensor({ ...tensor, name: "x".repeat(64) })).toThrow(/name/);
    expect(() => writer.addTensor({ ...tensor, name: "five", dims: [1, 1, 1, 1, 32] })).toThrow(/dimensions/);
    expect(() => new GgufWriter({ alignment: 48 })).toThrow(/power of two/);
  });

  it("rejects values that do not fit their declared type", async () => {
    const path = join(directory, "invalid.gguf");
    await expect(new GgufWriter().set("k", { type: "uint8", value: 256 }).write(path)).rejects.toThrow(RangeError);
    await expect(new GgufWriter().set("k", { type: "int32", value: 1.5 }).write(path)).rejects.toThrow(/integer/);
    await expect(stat(path), "invalid metadata creates no file").rejects.toThrow(/ENOENT/);
    const short = { name: "t", dims: [4], type: "F32", values: () => new Float32Array(3) } as const;
    await expect(new GgufWriter().addTensor(short).write(path)).rejects.toThrow(/produced 3 values, expected 4/);
  });
});
