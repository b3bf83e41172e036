import type { KvCacheType } from "../src/core/KvCacheType.js";
import { readGgufHeader, type GgufMetadataValue } from "../src/gguf/GgufReader.js";

/** Bytes a value takes in each type the bench runs: f16, and ggml's 32-value blocks of q8_0 (34 bytes) and q4_0 (18). */
const BYTES_PER_VALUE: Partial<Record<KvCacheType, number>> = { f16: 2, q8_0: 34 / 32, q4_0: 18 / 32 };

/** A KV cache in `type` over one in f16 (q8_0: 0.53). */
export function kvCacheScale(type: KvCacheType): number {
  const bytes = BYTES_PER_VALUE[type];
  if (bytes === undefined) throw new Error(`the bench knows no size for a ${type} KV cache: f16, q8_0 or q4_0`);
  return bytes / 2;
}

/** The largest of a per-layer array, or the value itself. */
function largest(value: GgufMetadataValue | undefined): number | undefined {
  if (value === undefined) return undefined;
  const values = (Array.isArray(value) ? value : [value]) as readonly unknown[];
  const numbers = values.map(Number).filter(Number.isFinite);
  return numbers.length > 0 ? Math.max(...numbers) : undefined;
}

/**
 * Bytes of an f16 KV cache per token of context, from the model's shape: every layer keeps a key
 * and a value of head_count_kv heads, each key_length (value_length) wide, at 2 bytes an element.
 * Undefined for models without attention heads in their metadata. Qwen2.5-0.5B: 24 layers × 2 KV
 * heads × 64 × (2 + 2) bytes = 12 KiB a token.
 */
export async function kvCacheBytesPerToken(modelPath: string): Promise<number | undefined> {
  const { metadata } = await readGgufHeader(modelPath);
  const architecture = metadata.get("general.architecture");
  if (typeof architecture !== "string") return undefined;
  const get = (key: string) => metadata.get(`${architecture}.${key}`);
  const layers = largest(get("block_count"));
  const heads = largest(get("attention.head_count"));
  const embedding = largest(get("embedding_length"));
  if (layers === undefined || heads === undefined || embedding === undefined) return undefined;
  const kvHeads = largest(get("attention.head_count_kv")) ?? heads;
  const keyLength = largest(get("attention.key_length")) ?? embedding / heads;
  const valueLength = largest(get("attention.value_length")) ?? embedding / heads;
  return layers * kvHeads * (keyLength + valueLength) * 2;
}
