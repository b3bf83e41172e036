/**
 * The element types a KV cache may be stored in, named as llama-server's `--cache-type-k` and
 * `--cache-type-v` name them (llama.cpp's common/arg.cpp `kv_cache_types`, by ggml_type_name).
 * f16 is llama.cpp's default. The quantized ones store 32 values per block: q8_0 in 34 bytes
 * (0.53× f16), q4_0 in 18 (0.28×).
 */
export const KV_CACHE_TYPES = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"] as const;

export type KvCacheType = (typeof KV_CACHE_TYPES)[number];

/** What a context's KV cache is stored as, and the memory llama.cpp allocated for that context. */
export interface KvCacheStatus {
  typeK: KvCacheType;
  typeV: KvCacheType;
  /**
   * Host and device memory llama.cpp allocated for the chat context, in bytes: its KV cache and
   * its compute buffers (llama_memory_breakdown's `context` plus `compute`; the weights are not
   * counted). The compute buffers hardly depend on the cache types (bench model, 16,384 cells: 28
   * MiB with f16, 26.5 with q8_0 or q4_0, beside a KV cache of 576, 306 and 162 MiB).
   */
  contextBytes: number;
}
