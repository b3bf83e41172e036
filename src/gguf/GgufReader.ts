// Reads and validates a GGUF file's header (the layout is described in GgufWriter.ts) without
// trusting any number in it: every count, length, array size, tensor offset and tensor size is
// checked against the bytes left in the file before anything is allocated or read, value and
// tensor types are checked, dimension products are checked for overflow, and the tensor data must
// lie in the file exactly where llama.cpp's gguf.cpp expects it. A file that passes can be handed
// to llama.cpp; one that fails is refused with a GgufRefusal naming the reason.
//
// The file is read in chunks of at most 1 MiB with FileHandle.read, never whole (models are GBs),
// and each chunk is a trip through the event loop, so other work goes on while a header is read.
import { constants } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { GGML_TYPES } from "./ggmlTypes.js";
import { NUMBER_SIZES, VALUE_TYPE_IDS, type GgufValue } from "./GgufWriter.js";

/** Why a file was refused; the message says where and with which numbers. */
export const ggufRefusalCodes = [
  "bad_magic",
  "unsupported_version",
  "truncated",
  "count_past_end",
  "length_past_end",
  "header_too_large",
  "too_many_keys",
  "too_many_tensors",
  "string_too_long",
  "chat_template_too_long",
  "metadata_too_large",
  "unknown_value_type",
  "nested_array",
  "empty_key",
  "duplicate_key",
  "wrong_key_type",
  "bad_alignment",
  "bad_tensor_name",
  "duplicate_tensor",
  "bad_dimension_count",
  "dimension_overflow",
  "unknown_tensor_type",
  "partial_block",
  "tensor_misaligned",
  "tensor_overlap",
  "tensor_gap",
  "tensor_past_end",
  "vocabulary_mismatch",
] as const;
export type GgufRefusalCode = (typeof ggufRefusalCodes)[number];

/** The one exception the reader throws about a file's content (I/O errors pass through as they are). */
export class GgufRefusal extends Error {
  readonly code: GgufRefusalCode;
  /** The message without its code. */
  readonly detail: string;

  constructor(code: GgufRefusalCode, detail: string) {
    super(`${detail} [${code}]`);
    this.name = "GgufRefusal";
    this.code = code;
    this.detail = detail;
  }
}

export type GgufScalar = number | bigint | boolean | string;
/** A metadata value as read: u64/i64 as bigint, other numbers as number; arrays of scalars (GGUF allows no nesting llama.cpp reads). */
export type GgufMetadataValue = GgufScalar | readonly GgufScalar[];

export interface GgufTensorInfo {
  readonly name: string;
  /** ggml order: dims[0] is the row length. */
  readonly dims: readonly bigint[];
  /** ggml type name, e.g. "Q4_K". */
  readonly type: string;
  /** Offset from the start of the data section. */
  readonly offset: bigint;
  readonly bytes: bigint;
}

export interface GgufHeader {
  readonly version: 2 | 3;
  /**
   * The metadata, except arrays of more than RETAINED_ARRAY_ITEMS items (the vocabulary, its
   * scores and merges): those are validated and skipped, and only their length is kept.
   */
  readonly metadata: ReadonlyMap<string, GgufMetadataValue>;
  /** Every array's item count, kept or not. */
  readonly arrayLengths: ReadonlyMap<string, number>;
  readonly tensors: readonly GgufTensorInfo[];
  readonly alignment: number;
  /** Where the tensor data begins in the file. */
  readonly dataOffset: number;
  /** Sum of every tensor's element count. */
  readonly parameterCount: number;
}

/** What reading cost, for tests that bound memory: the reader accounts every buffer it allocates. */
export interface GgufReadStats {
  /** The largest read buffer allocated (never more than the file's size). */
  largestBuffer: number;
  /** Estimated bytes of JavaScript values kept (keys, strings, short arrays). */
  retainedBytes: number;
  /** Bytes read from the file. */
  bytesRead: number;
}

/**
 * Everything before the tensor data: magic, counts, metadata and tensor infos. A real header is
 * mostly vocabulary: 5-10 MB for the 128k-262k token vocabularies of Llama 3, Qwen 2.5/3 and
 * Gemma 3 (each token an 8-byte length and its bytes, plus scores, types and up to 280k merges).
 * 64 MiB leaves 6x room and bounds how long a hostile header can keep the reader busy.
 */
const MAX_HEADER_BYTES = 64 * 1024 * 1024;
/**
 * Any one metadata string. The longest real ones are chat templates (tool-calling templates reach
 * 20-30 KB) and vocabulary tokens (bytes each); llama.cpp's own cap is 1 GiB, which it would
 * allocate. 8 MiB is 250x the longest template seen and bounds one allocation.
 */
const MAX_STRING_BYTES = 8 * 1024 * 1024;
/**
 * A chat template is rendered with Jinja for every chat request and kept in memory per loaded
 * model. The largest in published models are ~30 KB; 1 MiB (30x that) refuses only a template
 * that is not one (a several-MB blob would cost milliseconds of rendering per request).
 */
const MAX_CHAT_TEMPLATE_BYTES = 1024 * 1024;
/**
 * Real files have 20-100 keys and at most a few thousand tensors (DeepSeek-V3's 671B GGUF about
 * 1,000, split in parts). 65,536 of either is far past any model and bounds the per-key and
 * per-tensor objects kept (each ~100-200 bytes: at most ~13 MB).
 */
const MAX_KEYS = 65_536;
const MAX_TENSORS = 65_536;
/** Arrays up to this many items are kept (per-layer head counts, a few dozen); longer ones (vocabularies) only counted. */
const RETAINED_ARRAY_ITEMS = 4096;
/**
 * Estimated bytes of metadata values kept. Kept arrays are short, but a byte of u8 array becomes
 * an 8-byte JS number: without a budget, 64 MiB of short u8 arrays would cost 512 MB. Real files
 * keep a few KB (the template, names, per-layer arrays); 16 MiB is ample.
 */
export const MAX_RETAINED_BYTES = 16 * 1024 * 1024;

/** Read size: big enough that a 10 MB header takes ten reads, small enough to stay out of the way. */
const CHUNK_BYTES = 1024 * 1024;
/** Longest the reader runs without letting the event loop turn: /health must answer within 100 ms. */
const SLICE_MS = 10;
const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
const DEFAULT_ALIGNMENT = 32;
/** ggml's GGML_MAX_NAME is 64 including the terminating NUL. */
const MAX_TENSOR_NAME_BYTES = 63;
/** GGML_MAX_DIMS. */
const MAX_DIMS = 4;
const INT64_LIMIT = 1n << 63n;

type ValueType = keyof typeof VALUE_TYPE_IDS;
/** GGUF value types (gguf_type) by id: 0 uint8, … 12 float64. */
const VALUE_TYPES: readonly ValueType[] = Object.entries(VALUE_TYPE_IDS)
  .sort(([, a], [, b]) => a - b)
  .map(([name]) => name as ValueType);

/** The fewest bytes a value of each type takes: a string's is its u64 length, an array's its item type and count. */
const MIN_VALUE_BYTES: Record<ValueType, number> = { ...NUMBER_SIZES, bool: 1, string: 8, array: 12, uint64: 8, int64: 8 };

/**
 * Keys llama.cpp reads with one exact type (a wrong one makes it fail to load, or abort). A vision
 * projector's keys are read by mtmd's clip.cpp with gguf_get_val_bool/i32/u32/f32/str, which
 * GGML_ASSERT the type: a projector whose `clip.vision.image_size` were a string would abort the
 * server. test/unit/clipKeyTypes.test.ts derives the list from the bundled clip.cpp.
 */
export const REQUIRED_TYPES: Readonly<Record<string, ValueType>> = {
  "general.alignment": "uint32",
  "general.architecture": "string",
  "tokenizer.chat_template": "string",
  ...clipKeyTypes(),
};

function clipKeyTypes(): Record<string, ValueType> {
  const types: Record<string, ValueType> = {
    "general.name": "string",
    "general.description": "string",
    "clip.projector_type": "string",
    "clip.vision.projector_type": "string",
    "clip.audio.projector_type": "string",
    "clip.gen.audio.projector_type": "string",
    "clip.gen.audio.model_variant": "string",
    "clip.vision.mm_patch_merge_type": "string",
    "clip.has_vision_encoder": "bool",
    "clip.has_audio_encoder": "bool",
    "clip.has_gen_audio_encoder": "bool",
    "clip.use_gelu": "bool",
    "clip.use_silu": "bool",
    "clip.minicpmv_version": "int32",
  };
  const unsigned = [
    "clip.vision.image_size",
    "clip.vision.image_min_pixels",
    "clip.vision.image_max_pixels",
    "clip.vision.preproc_min_tiles",
    "clip.vision.preproc_max_tiles",
    "clip.vision.preproc_image_size",
    "clip.vision.patch_size",
    "clip.vision.projector.scale_factor",
    "clip.vision.projector.query_side",
    "clip.vision.projector.window_side",
    "clip.vision.spatial_merge_size",
    "clip.vision.n_wa_pattern",
    "clip.vision.window_size",
    "clip.vision.sam.head_count",
    "clip.vision.sam.block_count",
    "clip.vision.sam.embedding_length",
    "clip.vision.expert_used_count",
    "clip.minicpmv_query_num",
    "clip.audio.num_mel_bins",
    "clip.audio.projector.stack_factor",
    "clip.audio.chunk_size",
    "clip.audio.conv_kernel_size",
    "clip.audio.max_pos_emb",
    "clip.audio.projector.window_size",
    "clip.audio.projector.downsample_rate",
    "clip.audio.projector.head_count",
    "clip.audio.rvq.num_quantizers",
    "clip.audio.window_size",
    "clip.audio.local_block_count",
    "clip.audio.local_group_size",
    "clip.audio.subsampling_factor",
  ];
  for (const key of unsigned) types[key] = "uint32";
  // Read per modality: clip.vision.…, clip.audio.…, clip.gen.audio.….
  for (const modality of ["vision", "audio", "gen.audio"]) {
    for (const key of [
      "embedding_length",
      "feed_forward_length",
      "block_count",
      "projection_dim",
      "attention.head_count",
      "attention.head_count_kv",
      "attention.head_dim",
    ])
      types[`clip.${modality}.${key}`] = "uint32";
    types[`clip.${modality}.attention.layer_norm_epsilon`] = "float32";
  }
  return types;
}
const TOKENS_KEY = "tokenizer.ggml.tokens";
const EMBEDDING_TENSOR = "token_embd.weight";

/** Reads and validates the header of the GGUF file at `file`; throws GgufRefusal if it is not a sound one. */
export async function readGgufHeader(file: string, stats: GgufReadStats = newReadStats()): Promise<GgufHeader> {
  // O_NONBLOCK: opening a FIFO named *.gguf must not wait for a writer (it changes nothing for a file).
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new Error(`${file} is not a regular file`);
    return await parseHeader(new ChunkReader(handle, stat.size, stats));
  } finally {
    await handle.close();
  }
}

/**
 * The values of the keys `wanted` picks, whole (long arrays too: a vocabulary's tokens, scores and
 * merges) and with their GGUF types, as GgufWriter takes them: for copying one file's metadata into
 * another (test models with a real model's vocabulary). The file is validated as readGgufHeader
 * validates it; the whole arrays are bounded by the header's size (64 MiB), not by the retained
 * budget, so this is for files the caller trusts enough to copy, not for the server's refusals.
 */
export async function readGgufValues(file: string, wanted: (key: string) => boolean): Promise<Map<string, GgufValue>> {
  const values = new Map<string, GgufValue>();
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new Error(`${file} is not a regular file`);
    await parseHeader(new ChunkReader(handle, stat.size, newReadStats()), { wanted, values });
  } finally {
    await handle.close();
  }
  return values;
}

export function newReadStats(): GgufReadStats {
  return { largestBuffer: 0, retainedBytes: 0, bytesRead: 0 };
}

/** Keys to read whole and typed (readGgufValues), and where they go. */
interface TypedRead {
  wanted(key: string): boolean;
  values: Map<string, GgufValue>;
}

async function parseHeader(reader: ChunkReader, typed?: TypedRead): Promise<GgufHeader> {
  await reader.need(4, "the magic");
  if (reader.u32() !== GGUF_MAGIC) throw new GgufRefusal("bad_magic", 'the file does not begin with "GGUF"');
  await reader.need(4, "the version");
  const version = reader.u32();
  // v1 had u32 counts and lengths; llama.cpp dropped it ("GGUFv1 is no longer supported"), so do we.
  // v2 differs from v3 only in allowing big-endian files, which llama.cpp reads as v3.
  if (version !== 2 && version !== 3) {
    const hint = version === 1 ? " (v1 is no longer supported by llama.cpp)" : version > 0xffff ? " (a big-endian file?)" : "";
    throw new GgufRefusal("unsupported_version", `GGUF version ${version} is not 2 or 3${hint}`);
  }
  await reader.need(16, "the tensor and key counts");
  const tensorCount = reader.u64();
  const keyCount = reader.u64();
  // Each key takes at least 14 bytes (8-byte length, a 1-byte name, a 4-byte type, a 1-byte value);
  // each tensor info 24 (8-byte name length, 4-byte dimension count, 4-byte type, 8-byte offset).
  checkCount(reader, keyCount, 14, "key count");
  checkCount(reader, tensorCount, 24, "tensor count");
  if (keyCount > MAX_KEYS) throw new GgufRefusal("too_many_keys", `${keyCount} keys, more than the ${MAX_KEYS} allowed`);
  if (tensorCount > MAX_TENSORS) throw new GgufRefusal("too_many_tensors", `${tensorCount} tensors, more than the ${MAX_TENSORS} allowed`);

  const metadata = new Map<string, GgufMetadataValue>();
  const arrayLengths = new Map<string, number>();
  for (let index = 0; index < Number(keyCount); index++) {
    const key = await readKey(reader, index);
    if (metadata.has(key) || arrayLengths.has(key)) throw new GgufRefusal("duplicate_key", `the key "${key}" appears twice`);
    const type = await readValueType(reader, `the type of "${key}"`);
    const required = REQUIRED_TYPES[key];
    if (required !== undefined && type !== required) throw new GgufRefusal("wrong_key_type", `"${key}" is a ${type}, not a ${required}`);
    if (typed?.wanted(key)) {
      typed.values.set(key, await readTypedValue(reader, type, key, arrayLengths));
      continue;
    }
    const value = await readValue(reader, type, key, arrayLengths);
    if (value !== undefined) metadata.set(key, value);
  }
  const alignment = alignmentOf(metadata.get("general.alignment"));

  const tensors: GgufTensorInfo[] = [];
  const names = new Set<string>();
  let parameters = 0n;
  for (let index = 0; index < Number(tensorCount); index++) {
    const tensor = await readTensorInfo(reader, index);
    if (names.has(tensor.name)) throw new GgufRefusal("duplicate_tensor", `the tensor name "${tensor.name}" appears twice`);
    names.add(tensor.name);
    reader.retain(2 * tensor.name.length + 200);
    tensors.push(tensor);
    parameters += tensor.dims.reduce((product, dim) => product * dim, 1n);
  }

  const dataOffset = Math.ceil(reader.position / alignment) * alignment;
  checkTensorPlacement(tensors, alignment, dataOffset, reader.size);
  checkVocabulary(tensors, arrayLengths.get(TOKENS_KEY));
  return { version, metadata, arrayLengths, tensors, alignment, dataOffset, parameterCount: Number(parameters) };
}

function checkCount(reader: ChunkReader, count: bigint, minBytes: number, what: string): void {
  if (count * BigInt(minBytes) > BigInt(reader.left)) {
    throw new GgufRefusal(
      "count_past_end",
      `${what} ${count} needs at least ${count * BigInt(minBytes)} bytes at offset ${reader.position}, but ${reader.left} are left`,
    );
  }
}

async function readKey(reader: ChunkReader, index: number): Promise<string> {
  const key = await readString(reader, `key ${index}`, MAX_STRING_BYTES);
  if (key.length === 0) throw new GgufRefusal("empty_key", `key ${index} is empty`);
  reader.retain(64); // its entry in the maps
  return key;
}

async function readValueType(reader: ChunkReader, what: string): Promise<ValueType> {
  await reader.need(4, what);
  const id = reader.u32();
  const type = VALUE_TYPES[id];
  if (type === undefined) throw new GgufRefusal("unknown_value_type", `${what} is ${id}, not a GGUF value type (0-12)`);
  return type;
}

/**
 * A value, or undefined for an array too long to keep (its length goes into `arrayLengths`).
 * Array items are read without an `await` per item unless a read (or a turn of the event loop,
 * see ChunkReader.need) is due: a chain of 250,000 awaits is itself ~50 ms that nothing else runs in.
 */
async function readValue(
  reader: ChunkReader,
  type: ValueType,
  key: string,
  arrayLengths: Map<string, number>,
  whole?: (itemType: ValueType) => void,
): Promise<GgufMetadataValue | undefined> {
  if (type === "string") {
    return readString(reader, `"${key}"`, key.startsWith("tokenizer.chat_template") ? MAX_CHAT_TEMPLATE_BYTES : MAX_STRING_BYTES);
  }
  if (type !== "array") {
    await reader.need(MIN_VALUE_BYTES[type], `"${key}"`);
    return readNumber(reader, type, key);
  }

  const itemType = await readValueType(reader, `the item type of "${key}"`);
  // The format allows arrays of arrays; llama.cpp refuses them (gguf.cpp: "invalid GGUF type"), so do we.
  if (itemType === "array") throw new GgufRefusal("nested_array", `"${key}" is an array of arrays`);
  if (key === TOKENS_KEY && itemType !== "string")
    throw new GgufRefusal("wrong_key_type", `"${key}" is an array of ${itemType}, not of strings`);
  await reader.need(8, `the length of "${key}"`);
  const count = reader.u64();
  const itemBytes = MIN_VALUE_BYTES[itemType];
  if (count * BigInt(itemBytes) > BigInt(reader.left)) {
    throw new GgufRefusal(
      "count_past_end",
      `"${key}" claims ${count} items of at least ${itemBytes} bytes at offset ${reader.position}, but ${reader.left} bytes are left`,
    );
  }
  const length = Number(count);
  arrayLengths.set(key, length);
  whole?.(itemType);
  const keep = whole !== undefined || length <= RETAINED_ARRAY_ITEMS;
  // A whole array is bounded by the header's size instead (readGgufValues).
  const retain = (bytes: number) => {
    if (whole === undefined) reader.retain(bytes);
  };
  if (keep) retain(16 * length + 64);
  if (itemType !== "string") {
    if (!keep) {
      reader.skip(length * itemBytes, `"${key}"`);
      return undefined;
    }
    // Fixed-size items: at most 4,096 x 8 bytes (or a whole array, within the header's bound), read at once.
    await reader.need(length * itemBytes, `"${key}"`);
    return Array.from({ length }, () => readNumber(reader, itemType, key));
  }
  const items: string[] = [];
  for (let index = 0; index < length; index++) {
    const what = `item ${index} of "${key}"`;
    const lengthRead = reader.need(8, what);
    if (lengthRead) await lengthRead;
    const bytes = stringLength(reader, what, MAX_STRING_BYTES);
    if (!keep) {
      reader.skip(bytes, what);
      continue;
    }
    retain(2 * bytes + 32);
    const bytesRead = reader.need(bytes, what);
    if (bytesRead) await bytesRead;
    items.push(reader.utf8(bytes));
  }
  return keep ? items : undefined;
}

/** A value read whole (arrays of any length), with its GGUF type spelled out as GgufWriter takes it. */
async function readTypedValue(reader: ChunkReader, type: ValueType, key: string, arrayLengths: Map<string, number>): Promise<GgufValue> {
  let itemType: ValueType | undefined;
  const value = await readValue(reader, type, key, arrayLengths, (type) => (itemType = type));
  // The value's type and (for arrays) its items' type are as read, so each assertion below matches what the file holds.
  if (itemType === undefined) return { type, value } as GgufValue;
  return { type: "array", itemType, values: value } as GgufValue;
}

/** A fixed-size value whose bytes are in the buffer. */
function readNumber(reader: ChunkReader, type: Exclude<ValueType, "array" | "string">, key: string): GgufScalar {
  switch (type) {
    case "uint8":
      return reader.u8();
    case "int8":
      return reader.i8();
    case "uint16":
      return reader.u16();
    case "int16":
      return reader.i16();
    case "uint32":
      return reader.u32();
    case "int32":
      return reader.i32();
    case "float32":
      return reader.f32();
    case "float64":
      return reader.f64();
    case "bool": {
      const byte = reader.u8();
      if (byte > 1) throw new GgufRefusal("wrong_key_type", `"${key}" holds a bool of value ${byte}, not 0 or 1`);
      return byte === 1;
    }
    case "uint64":
      return reader.u64();
    case "int64":
      return reader.i64();
    default:
      return type satisfies never;
  }
}

/** Reads a string to keep, its length checked (and counted against MAX_RETAINED_BYTES) before anything is allocated. */
async function readString(reader: ChunkReader, what: string, maxBytes: number): Promise<string> {
  await reader.need(8, `the length of ${what}`);
  const length = stringLength(reader, what, maxBytes);
  // Up to 2 bytes a character once decoded, and V8's string header.
  reader.retain(2 * length + 32);
  await reader.need(length, what);
  return reader.utf8(length);
}

/** Reads a string's u64 length (its 8 bytes are in the buffer) and checks it against the file and `maxBytes`. */
function stringLength(reader: ChunkReader, what: string, maxBytes: number): number {
  const length = reader.u64AsNumber();
  if (length > reader.left)
    throw new GgufRefusal("length_past_end", `${what} claims ${length} bytes at offset ${reader.position}, but ${reader.left} are left`);
  if (length > maxBytes) {
    const code = maxBytes === MAX_CHAT_TEMPLATE_BYTES ? "chat_template_too_long" : "string_too_long";
    throw new GgufRefusal(code, `${what} is ${length} bytes, more than the ${maxBytes} allowed`);
  }
  return length;
}

async function readTensorInfo(reader: ChunkReader, index: number): Promise<GgufTensorInfo> {
  await reader.need(8, `the name length of tensor ${index}`);
  const nameLength = stringLength(reader, `the name of tensor ${index}`, MAX_STRING_BYTES);
  if (nameLength > MAX_TENSOR_NAME_BYTES) {
    throw new GgufRefusal(
      "bad_tensor_name",
      `the name of tensor ${index} is ${nameLength} bytes, more than llama.cpp's ${MAX_TENSOR_NAME_BYTES}`,
    );
  }
  await reader.need(nameLength, `the name of tensor ${index}`);
  const name = reader.utf8(nameLength);
  await reader.need(4, `the dimension count of "${name}"`);
  const dimCount = reader.u32();
  if (dimCount > MAX_DIMS) throw new GgufRefusal("bad_dimension_count", `"${name}" has ${dimCount} dimensions, more than ${MAX_DIMS}`);
  await reader.need(8 * dimCount + 12, `the dimensions, type and offset of "${name}"`);
  const dims: bigint[] = [];
  for (let dim = 0; dim < dimCount; dim++) dims.push(reader.u64());
  const typeId = reader.u32();
  const offset = reader.u64();
  // llama.cpp holds dimensions and their product in int64_t: each, and the product, must be below 2^63.
  let elements = 1n;
  for (const dim of dims) {
    elements *= dim;
    if (dim >= INT64_LIMIT || elements >= INT64_LIMIT) {
      throw new GgufRefusal("dimension_overflow", `the dimensions [${dims.join(", ")}] of "${name}" multiply past 2^63`);
    }
  }
  const type = GGML_TYPES.get(typeId);
  if (!type) throw new GgufRefusal("unknown_tensor_type", `"${name}" has ggml type ${typeId}, which llama.cpp does not know`);
  const rowLength = dims[0] ?? 1n;
  if (rowLength % BigInt(type.blockSize) !== 0n) {
    throw new GgufRefusal(
      "partial_block",
      `"${name}" (${type.name}) has rows of ${rowLength} elements, not a multiple of its block size ${type.blockSize}`,
    );
  }
  return { name, dims, type: type.name, offset, bytes: (elements / BigInt(type.blockSize)) * BigInt(type.blockBytes) };
}

function alignmentOf(value: GgufMetadataValue | undefined): number {
  if (value === undefined) return DEFAULT_ALIGNMENT;
  const alignment = value as number; // a uint32, checked as the key was read
  if (alignment === 0 || (alignment & (alignment - 1)) !== 0)
    throw new GgufRefusal("bad_alignment", `general.alignment ${alignment} is not a power of two`);
  return alignment;
}

/**
 * llama.cpp (gguf.cpp) requires each tensor at exactly the previous one's end padded to the
 * alignment, starting at 0, so tensors are aligned and neither overlap nor leave gaps; and
 * (llama-model-loader) each tensor's bytes must be in the file.
 */
function checkTensorPlacement(tensors: readonly GgufTensorInfo[], alignment: number, dataOffset: number, fileSize: number): void {
  const align = BigInt(alignment);
  let expected = 0n;
  for (const tensor of tensors) {
    if (tensor.offset % align !== 0n)
      throw new GgufRefusal(
        "tensor_misaligned",
        `"${tensor.name}" is at data offset ${tensor.offset}, not a multiple of the alignment ${alignment}`,
      );
    if (tensor.offset < expected)
      throw new GgufRefusal(
        "tensor_overlap",
        `"${tensor.name}" at data offset ${tensor.offset} overlaps the tensor before it, which ends at ${expected}`,
      );
    if (tensor.offset > expected)
      throw new GgufRefusal(
        "tensor_gap",
        `"${tensor.name}" is at data offset ${tensor.offset}, not at ${expected} right after the tensor before it`,
      );
    const end = BigInt(dataOffset) + tensor.offset + tensor.bytes;
    if (end > BigInt(fileSize))
      throw new GgufRefusal(
        "tensor_past_end",
        `"${tensor.name}" (${tensor.bytes} bytes) ends at byte ${end}, past the end of the ${fileSize}-byte file`,
      );
    expected += ((tensor.bytes + align - 1n) / align) * align;
  }
}

/** The embedding matrix has one row per token: llama.cpp refuses a file where they differ. */
function checkVocabulary(tensors: readonly GgufTensorInfo[], tokens: number | undefined): void {
  const embedding = tensors.find((tensor) => tensor.name === EMBEDDING_TENSOR);
  const rows = embedding?.dims[1];
  if (tokens === undefined || rows === undefined || rows === BigInt(tokens)) return;
  throw new GgufRefusal("vocabulary_mismatch", `"${TOKENS_KEY}" has ${tokens} tokens, but "${EMBEDDING_TENSOR}" has ${rows} rows`);
}

/**
 * A cursor over the file, holding at most one chunk (or one long string) at a time. `need(n)`
 * makes sure the next n bytes are in memory, refusing before any allocation when the file (or
 * the header bound) ends first; the typed reads after it are synchronous.
 */
class ChunkReader {
  readonly size: number;
  #buffer: Buffer = Buffer.alloc(0);
  /** File position of #buffer[0], and how many of its bytes are valid. */
  #start = 0;
  #valid = 0;
  #position = 0;
  #calls = 0;
  #lastYield = performance.now();

  constructor(
    readonly handle: FileHandle,
    size: number,
    readonly stats: GgufReadStats,
  ) {
    this.size = size;
  }

  get position(): number {
    return this.#position;
  }

  /** Bytes between the cursor and the end of the file. */
  get left(): number {
    return this.size - this.#position;
  }

  /**
   * Makes the next `bytes` bytes readable; undefined when they already are, so a hot loop awaits
   * only when a read (or a turn of the event loop) is due. Refuses, before allocating anything,
   * when the file or the header bound ends first.
   */
  need(bytes: number, what: string): Promise<void> | undefined {
    if (this.#start + this.#valid - this.#position >= bytes) {
      // Parsing a chunk takes ~20 ms for 1 MiB of short strings: every 64 calls, let the event
      // loop run if SLICE_MS have passed since it last did.
      if (++this.#calls % 64 === 0 && performance.now() - this.#lastYield > SLICE_MS) return this.#yield();
      return undefined;
    }
    if (bytes > this.left)
      throw new GgufRefusal("truncated", `the file ends at byte ${this.size}, inside ${what} (${bytes} bytes at offset ${this.#position})`);
    this.#checkBound(this.#position + bytes);
    return this.#fill(bytes, what);
  }

  async #fill(bytes: number, what: string): Promise<void> {
    const want = Math.max(bytes, Math.min(CHUNK_BYTES, this.left));
    if (this.#buffer.length < want) {
      this.#buffer = Buffer.allocUnsafe(want);
      this.stats.largestBuffer = Math.max(this.stats.largestBuffer, want);
    }
    let read = 0;
    while (read < want) {
      const { bytesRead } = await this.handle.read(this.#buffer, read, want - read, this.#position + read);
      // The file shrank after it was measured.
      if (bytesRead === 0) throw new GgufRefusal("truncated", `the file ends at byte ${this.#position + read}, inside ${what}`);
      read += bytesRead;
    }
    this.#lastYield = performance.now(); // the read was a turn of the event loop
    this.stats.bytesRead += read;
    this.#start = this.#position;
    this.#valid = want;
  }

  async #yield(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    this.#lastYield = performance.now();
  }

  /** Moves past `bytes` the caller has checked are in the file, reading none of them. */
  skip(bytes: number, what: string): void {
    if (bytes > this.left) throw new GgufRefusal("truncated", `the file ends at byte ${this.size}, inside ${what}`);
    this.#checkBound(this.#position + bytes);
    this.#position += bytes;
  }

  /** Counts kept values against MAX_RETAINED_BYTES. */
  retain(bytes: number): void {
    if (this.stats.retainedBytes + bytes > MAX_RETAINED_BYTES) {
      throw new GgufRefusal("metadata_too_large", `the metadata to keep exceeds ${MAX_RETAINED_BYTES} bytes at offset ${this.#position}`);
    }
    this.stats.retainedBytes += bytes;
  }

  #checkBound(end: number): void {
    if (end > MAX_HEADER_BYTES) throw new GgufRefusal("header_too_large", `the header goes on past ${MAX_HEADER_BYTES} bytes`);
  }

  #take(bytes: number): number {
    const at = this.#position - this.#start;
    this.#position += bytes;
    return at;
  }

  u8 = () => this.#buffer.readUInt8(this.#take(1));
  i8 = () => this.#buffer.readInt8(this.#take(1));
  u16 = () => this.#buffer.readUInt16LE(this.#take(2));
  i16 = () => this.#buffer.readInt16LE(this.#take(2));
  u32 = () => this.#buffer.readUInt32LE(this.#take(4));
  i32 = () => this.#buffer.readInt32LE(this.#take(4));
  f32 = () => this.#buffer.readFloatLE(this.#take(4));
  f64 = () => this.#buffer.readDoubleLE(this.#take(8));
  u64 = () => this.#buffer.readBigUInt64LE(this.#take(8));
  /** A u64 as a number: exact below 2^53, and above it still larger than any file, which is all a length is compared with. */
  u64AsNumber = () => {
    const at = this.#take(8);
    return this.#buffer.readUInt32LE(at) + this.#buffer.readUInt32LE(at + 4) * 2 ** 32;
  };
  i64 = () => this.#buffer.readBigInt64LE(this.#take(8));
  utf8 = (bytes: number) => {
    const at = this.#take(bytes);
    return this.#buffer.toString("utf8", at, at + bytes);
  };
}
