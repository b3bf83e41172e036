// The ggml tensor types a GGUF file may hold: for each, the elements per block and the bytes per
// block. Taken from `type_traits` in ggml/src/ggml.c of the llama.cpp node-llama-cpp 3.22.1 builds
// (release v0.5.0's bundle): block sizes are its QK_* constants, bytes per block the sizeof of its
// block_* structs in ggml-common.h. Ids 4, 5 (Q4_2, Q4_3), 31-33 (Q4_0_4_4…) and 36-38 (IQ4_NL_4_4…)
// are retired: llama.cpp gives them block size 0 and refuses them in files, as this table does by
// leaving them out. GGML_TYPE_COUNT is 43 there.

export interface GgmlTypeTraits {
  readonly name: string;
  /** Elements per block: a row's length must be a multiple of it. */
  readonly blockSize: number;
  /** Bytes one block takes in the file. */
  readonly blockBytes: number;
}

const traits = (name: string, blockSize: number, blockBytes: number): GgmlTypeTraits => ({ name, blockSize, blockBytes });

/** QK_K, the super-block of the k-quants and most i-quants. */
const QK_K = 256;

export const GGML_TYPES: ReadonlyMap<number, GgmlTypeTraits> = new Map([
  [0, traits("F32", 1, 4)],
  [1, traits("F16", 1, 2)],
  [2, traits("Q4_0", 32, 18)],
  [3, traits("Q4_1", 32, 20)],
  [6, traits("Q5_0", 32, 22)],
  [7, traits("Q5_1", 32, 24)],
  [8, traits("Q8_0", 32, 34)],
  [9, traits("Q8_1", 32, 36)],
  [10, traits("Q2_K", QK_K, 84)],
  [11, traits("Q3_K", QK_K, 110)],
  [12, traits("Q4_K", QK_K, 144)],
  [13, traits("Q5_K", QK_K, 176)],
  [14, traits("Q6_K", QK_K, 210)],
  [15, traits("Q8_K", QK_K, 292)],
  [16, traits("IQ2_XXS", QK_K, 66)],
  [17, traits("IQ2_XS", QK_K, 74)],
  [18, traits("IQ3_XXS", QK_K, 98)],
  [19, traits("IQ1_S", QK_K, 50)],
  [20, traits("IQ4_NL", 32, 18)],
  [21, traits("IQ3_S", QK_K, 110)],
  [22, traits("IQ2_S", QK_K, 82)],
  [23, traits("IQ4_XS", QK_K, 136)],
  [24, traits("I8", 1, 1)],
  [25, traits("I16", 1, 2)],
  [26, traits("I32", 1, 4)],
  [27, traits("I64", 1, 8)],
  [28, traits("F64", 1, 8)],
  [29, traits("IQ1_M", QK_K, 56)],
  [30, traits("BF16", 1, 2)],
  [34, traits("TQ1_0", QK_K, 54)],
  [35, traits("TQ2_0", QK_K, 66)],
  [39, traits("MXFP4", 32, 17)],
  [40, traits("NVFP4", 64, 36)],
  [41, traits("Q1_0", 128, 18)],
  [42, traits("Q2_0", 64, 18)],
]);
