// Writes GGUF v3 files (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md), little-endian:
//
//   header       magic "GGUF", version u32, tensor count u64, metadata key/value count u64
//   metadata     per key: string key, value type u32, value
//   tensor infos per tensor: string name, n_dims u32, dims u64[n_dims], ggml type u32, offset u64
//   padding      zeros up to a multiple of the alignment
//   tensor data  each tensor at its offset (relative to the start of this section), padded
//
// Strings are a u64 byte length followed by UTF-8 without a terminator. Arrays are an item type
// u32, an item count u64 and the items. Tensor data is produced and written one tensor at a time,
// so a model larger than memory can still be written.
import { open } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { Q8_0_BLOCK_BYTES, Q8_0_BLOCK_SIZE, float32ToFloat16Bits, quantizeQ8_0 } from "./quantizeQ8_0.js";

const GGUF_MAGIC = "GGUF";
const GGUF_VERSION = 3;
/** The spec's alignment when `general.alignment` is absent. */
const GGUF_DEFAULT_ALIGNMENT = 32;
const ALIGNMENT_KEY = "general.alignment";
/** ggml's GGML_MAX_NAME, including the terminating NUL: llama.cpp rejects longer tensor names. */
const MAX_TENSOR_NAME_BYTES = 63;
/** ggml's GGML_MAX_DIMS. */
const MAX_TENSOR_DIMS = 4;

/** GGUF metadata value type ids (gguf_metadata_value_type in the spec). */
export const VALUE_TYPE_IDS = {
  uint8: 0,
  int8: 1,
  uint16: 2,
  int16: 3,
  uint32: 4,
  int32: 5,
  float32: 6,
  bool: 7,
  string: 8,
  array: 9,
  uint64: 10,
  int64: 11,
  float64: 12,
} as const;

export type GgufNumberType = "uint8" | "int8" | "uint16" | "int16" | "uint32" | "int32" | "float32" | "float64";
export type GgufBigIntType = "uint64" | "int64";

export type GgufArrayValue =
  | { readonly type: "array"; readonly itemType: GgufNumberType; readonly values: readonly number[] }
  | { readonly type: "array"; readonly itemType: GgufBigIntType; readonly values: readonly bigint[] }
  | { readonly type: "array"; readonly itemType: "bool"; readonly values: readonly boolean[] }
  | { readonly type: "array"; readonly itemType: "string"; readonly values: readonly string[] };

/** A metadata value with its GGUF type spelled out, since a JS number does not say which one it is. */
export type GgufValue =
  | { readonly type: GgufNumberType; readonly value: number }
  | { readonly type: GgufBigIntType; readonly value: bigint }
  | { readonly type: "bool"; readonly value: boolean }
  | { readonly type: "string"; readonly value: string }
  | GgufArrayValue;

/** The ggml tensor types this writer encodes, with their ggml_type ids. */
export const GgmlType = { F32: 0, F16: 1, Q8_0: 8 } as const;
export type GgmlTypeName = keyof typeof GgmlType;

export interface GgufTensor {
  /** At most 63 bytes of UTF-8, unique within the file. */
  readonly name: string;
  /**
   * Dimensions in ggml order: dims[0] is the number of contiguous elements in a row (for a
   * weight matrix, its input size), dims[1] the number of rows, and so on. At most 4.
   */
  readonly dims: readonly number[];
  readonly type: GgmlTypeName;
  /**
   * Produces the tensor's float32 values, row after row. Called once, while the file is written,
   * so that only one tensor's values need to be in memory at a time.
   */
  readonly values: () => Float32Array;
}

export interface GgufWriterOptions {
  /** Alignment of the tensor data, a power of two; written as `general.alignment` unless it is the default 32. */
  readonly alignment?: number;
}

export class GgufWriter {
  readonly alignment: number;
  readonly #metadata = new Map<string, GgufValue>();
  readonly #tensors: GgufTensor[] = [];

  constructor(options: GgufWriterOptions = {}) {
    const alignment = options.alignment ?? GGUF_DEFAULT_ALIGNMENT;
    if (!Number.isInteger(alignment) || alignment <= 0 || alignment > 0xffff_ffff || (alignment & (alignment - 1)) !== 0) {
      throw new RangeError(`GGUF alignment must be a power of two, got ${alignment}`);
    }
    this.alignment = alignment;
    if (alignment !== GGUF_DEFAULT_ALIGNMENT) this.#metadata.set(ALIGNMENT_KEY, { type: "uint32", value: alignment });
  }

  /** Adds a metadata key/value. Keys are unique; `general.alignment` comes from the constructor option. */
  set(key: string, value: GgufValue): this {
    if (key === ALIGNMENT_KEY) throw new Error(`Set ${ALIGNMENT_KEY} with the GgufWriter alignment option`);
    if (this.#metadata.has(key)) throw new Error(`Duplicate GGUF metadata key: ${key}`);
    if (key.length === 0) throw new Error("GGUF metadata keys must not be empty");
    this.#metadata.set(key, value);
    return this;
  }

  /** Removes a metadata key, so that `set` may give it another value (a file that differs from a sound one by one key). */
  unset(key: string): this {
    this.#metadata.delete(key);
    return this;
  }

  /** Adds a tensor; tensors are written in the order they are added. */
  addTensor(tensor: GgufTensor): this {
    validateTensor(tensor);
    if (this.#tensors.some((existing) => existing.name === tensor.name)) {
      throw new Error(`Duplicate GGUF tensor name: ${tensor.name}`);
    }
    this.#tensors.push({ ...tensor, dims: [...tensor.dims] });
    return this;
  }

  /** Total number of tensor elements (weights) added so far. */
  get parameterCount(): number {
    return this.#tensors.reduce((sum, tensor) => sum + elementCount(tensor.dims), 0);
  }

  /**
   * Writes the file (replacing any file at `path`) and returns its size in bytes. Invalid metadata
   * fails before the file is created; a failure while producing tensor data leaves a partial file,
   * so write to a temporary name and rename it when others may read the path.
   */
  async write(path: string): Promise<number> {
    const header = this.#encodeHeader();
    const handle = await open(path, "w");
    try {
      let written = await writeAll(handle, header);
      for (const tensor of this.#tensors) {
        const data = encodeTensorData(tensor);
        written += await writeAll(handle, data);
        written += await writeAll(handle, new Uint8Array(paddingFor(data.length, this.alignment)));
      }
      return written;
    } finally {
      await handle.close();
    }
  }

  /** Everything before the tensor data: header, metadata, tensor infos and the alignment padding. */
  #encodeHeader(): Uint8Array {
    const out = new ByteSink();
    out.bytes(Buffer.from(GGUF_MAGIC, "ascii"));
    out.uint32(GGUF_VERSION);
    out.uint64(BigInt(this.#tensors.length));
    out.uint64(BigInt(this.#metadata.size));
    for (const [key, value] of this.#metadata) {
      out.string(key);
      out.uint32(VALUE_TYPE_IDS[value.type]);
      writeValue(out, value);
    }
    let offset = 0;
    for (const tensor of this.#tensors) {
      out.string(tensor.name);
      out.uint32(tensor.dims.length);
      for (const dim of tensor.dims) out.uint64(BigInt(dim));
      out.uint32(GgmlType[tensor.type]);
      // llama.cpp requires each offset to be exactly the previous tensor's padded end, not merely aligned.
      out.uint64(BigInt(offset));
      const size = tensorByteSize(tensor);
      offset += size + paddingFor(size, this.alignment);
    }
    out.bytes(new Uint8Array(paddingFor(out.length, this.alignment)));
    return out.toBytes();
  }
}

/** Bytes of data a tensor of this type and shape occupies, before padding. */
function tensorByteSize(tensor: Pick<GgufTensor, "dims" | "type">): number {
  const elements = elementCount(tensor.dims);
  switch (tensor.type) {
    case "F32":
      return elements * 4;
    case "F16":
      return elements * 2;
    case "Q8_0":
      return (elements / Q8_0_BLOCK_SIZE) * Q8_0_BLOCK_BYTES;
  }
}

function validateTensor(tensor: GgufTensor): void {
  const nameBytes = Buffer.byteLength(tensor.name, "utf8");
  if (nameBytes === 0 || nameBytes > MAX_TENSOR_NAME_BYTES) {
    throw new RangeError(`Tensor name must be 1-${MAX_TENSOR_NAME_BYTES} bytes: "${tensor.name}"`);
  }
  if (tensor.dims.length === 0 || tensor.dims.length > MAX_TENSOR_DIMS) {
    throw new RangeError(`Tensor ${tensor.name} must have 1-${MAX_TENSOR_DIMS} dimensions`);
  }
  if (!tensor.dims.every((dim) => Number.isSafeInteger(dim) && dim > 0)) {
    throw new RangeError(`Tensor ${tensor.name} has invalid dimensions [${tensor.dims.join(", ")}]`);
  }
  // Blocks never straddle rows (ggml checks ne[0] % block size when loading).
  if (tensor.type === "Q8_0" && (tensor.dims[0] ?? 0) % Q8_0_BLOCK_SIZE !== 0) {
    throw new RangeError(`Q8_0 tensor ${tensor.name} needs a row length that is a multiple of ${Q8_0_BLOCK_SIZE}`);
  }
}

function encodeTensorData(tensor: GgufTensor): Uint8Array {
  const values = tensor.values();
  const expected = elementCount(tensor.dims);
  if (values.length !== expected) {
    throw new RangeError(`Tensor ${tensor.name} produced ${values.length} values, expected ${expected}`);
  }
  switch (tensor.type) {
    case "F32": {
      const out = new Uint8Array(values.length * 4);
      const view = new DataView(out.buffer);
      values.forEach((value, i) => view.setFloat32(i * 4, value, true));
      return out;
    }
    case "F16": {
      const out = new Uint8Array(values.length * 2);
      const view = new DataView(out.buffer);
      values.forEach((value, i) => view.setUint16(i * 2, float32ToFloat16Bits(value), true));
      return out;
    }
    case "Q8_0":
      return quantizeQ8_0(values);
  }
}

function writeValue(out: ByteSink, value: GgufValue): void {
  switch (value.type) {
    case "array":
      writeArray(out, value);
      return;
    case "uint64":
    case "int64":
      out.bigint(value.type, value.value);
      return;
    case "bool":
      out.uint8(value.value ? 1 : 0);
      return;
    case "string":
      out.string(value.value);
      return;
    default:
      out.number(value.type, value.value);
  }
}

/** Writes an array's item type, count and items; arrays of arrays are not needed here. */
function writeArray(out: ByteSink, array: GgufArrayValue): void {
  out.uint32(VALUE_TYPE_IDS[array.itemType]);
  out.uint64(BigInt(array.values.length));
  switch (array.itemType) {
    case "uint64":
    case "int64":
      for (const item of array.values) out.bigint(array.itemType, item);
      return;
    case "bool":
      for (const item of array.values) out.uint8(item ? 1 : 0);
      return;
    case "string":
      for (const item of array.values) out.string(item);
      return;
    default:
      for (const item of array.values) out.number(array.itemType, item);
  }
}

/** Collects little-endian encoded values; Buffer's write methods reject out-of-range integers. */
class ByteSink {
  readonly #chunks: Uint8Array[] = [];
  #byteLength = 0;

  get length(): number {
    return this.#byteLength;
  }

  bytes(bytes: Uint8Array): void {
    this.#chunks.push(bytes);
    this.#byteLength += bytes.length;
  }

  uint8(value: number): void {
    this.number("uint8", value);
  }

  uint32(value: number): void {
    this.number("uint32", value);
  }

  uint64(value: bigint): void {
    this.bigint("uint64", value);
  }

  number(type: GgufNumberType, value: number): void {
    if (type !== "float32" && type !== "float64" && !Number.isInteger(value)) {
      throw new RangeError(`GGUF ${type} value must be an integer, got ${value}`);
    }
    const buffer = Buffer.alloc(NUMBER_SIZES[type]);
    NUMBER_WRITERS[type](buffer, value);
    this.bytes(buffer);
  }

  bigint(type: GgufBigIntType, value: bigint): void {
    const buffer = Buffer.alloc(8);
    if (type === "uint64") buffer.writeBigUInt64LE(value);
    else buffer.writeBigInt64LE(value);
    this.bytes(buffer);
  }

  string(value: string): void {
    const utf8 = Buffer.from(value, "utf8");
    this.uint64(BigInt(utf8.length));
    this.bytes(utf8);
  }

  toBytes(): Uint8Array {
    return Buffer.concat(this.#chunks, this.#byteLength);
  }
}

/** Bytes of each fixed-size number type. */
export const NUMBER_SIZES: Record<GgufNumberType, number> = {
  uint8: 1,
  int8: 1,
  uint16: 2,
  int16: 2,
  uint32: 4,
  int32: 4,
  float32: 4,
  float64: 8,
};

const NUMBER_WRITERS: Record<GgufNumberType, (buffer: Buffer, value: number) => void> = {
  uint8: (buffer, value) => buffer.writeUInt8(value),
  int8: (buffer, value) => buffer.writeInt8(value),
  uint16: (buffer, value) => buffer.writeUInt16LE(value),
  int16: (buffer, value) => buffer.writeInt16LE(value),
  uint32: (buffer, value) => buffer.writeUInt32LE(value),
  int32: (buffer, value) => buffer.writeInt32LE(value),
  float32: (buffer, value) => buffer.writeFloatLE(value),
  float64: (buffer, value) => buffer.writeDoubleLE(value),
};

function elementCount(dims: readonly number[]): number {
  return dims.reduce((product, dim) => product * dim, 1);
}

function paddingFor(size: number, alignment: number): number {
  return (alignment - (size % alignment)) % alignment;
}

/** FileHandle.write may write less than asked; loop until every byte is on its way to the file. */
async function writeAll(handle: FileHandle, bytes: Uint8Array): Promise<number> {
  let done = 0;
  while (done < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, done, bytes.length - done);
    done += bytesWritten;
  }
  return bytes.length;
}
