// Issue 28, finding 4: a malformed GGUF file must never exhaust memory, hang, or reach llama.cpp.
// The bounded reader against a generated corpus of malformed files, each with its expected
// outcome, and against random mutations of a sound model.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import fc from "fast-check";
import { readGgufFileInfo } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  GgufRefusal,
  ggufRefusalCodes,
  MAX_RETAINED_BYTES,
  newReadStats,
  readGgufHeader,
  readGgufValues,
  type GgufReadStats,
} from "../../src/gguf/GgufReader.js";
import { GgufWriter } from "../../src/gguf/GgufWriter.js";
import { checkModelFile } from "../../src/models/checkModelFile.js";
import { ggufCorpus, writeCorpus, type CorpusCase } from "../support/ggufCorpus.js";
import { testModelPath } from "../support/testModels.js";

let directory: string;
const corpus = ggufCorpus();
let files: string[];

beforeAll(async () => {
  directory = await mkdtemp(path.join(os.tmpdir(), "gguf-reader-"));
  files = await writeCorpus(directory, corpus);
});

afterAll(() => rm(directory, { recursive: true, force: true }));

/** "accepted", or the refusal's code; anything else thrown is a crash and fails the test. */
async function outcome(file: string, stats: GgufReadStats = newReadStats()): Promise<string> {
  try {
    await readGgufHeader(file, stats);
    return "accepted";
  } catch (error) {
    if (error instanceof GgufRefusal) return error.code;
    throw error;
  }
}

describe("the GGUF reader on a corpus of malformed files", () => {
  it("has at least 40 files, covering every refusal code", () => {
    expect(corpus.length).toBeGreaterThanOrEqual(40);
    const covered = new Set(corpus.map((entry) => entry.expected));
    expect(ggufRefusalCodes.filter((code) => !covered.has(code))).toEqual([]);
  });

  it.each(corpus.map((entry, index) => [entry.name, entry.expected, index] as const))("%s: %s", async (_name, expected, index) => {
    const stats = newReadStats();
    expect(await outcome(files[index]!, stats)).toBe(expected);
    // Memory: no read buffer larger than the file, and kept values within their budget.
    const size = (corpus[index] as CorpusCase).sparseSize ?? (corpus[index] as CorpusCase).bytes.length;
    expect(stats.largestBuffer).toBeLessThanOrEqual(size);
    expect(stats.retainedBytes).toBeLessThanOrEqual(MAX_RETAINED_BYTES);
  });

  it("says where and why in the message", async () => {
    const reproducer = corpus.findIndex((entry) => entry.name.startsWith("issue 28"));
    await expect(readGgufHeader(files[reproducer]!)).rejects.toThrow(
      "key count 1099511627776 needs at least 15393162788864 bytes at offset 24, but 64 are left [count_past_end]",
    );
    const mismatch = corpus.findIndex((entry) => entry.expected === "vocabulary_mismatch");
    await expect(readGgufHeader(files[mismatch]!)).rejects.toThrow(
      '"tokenizer.ggml.tokens" has 4 tokens, but "token_embd.weight" has 5 rows',
    );
  });

  it("reads a 70 MB sparse file's header without reading its bytes", async () => {
    const index = corpus.findIndex((entry) => entry.expected === "header_too_large");
    const stats = newReadStats();
    expect(await outcome(files[index]!, stats)).toBe("header_too_large");
    expect(stats.bytesRead).toBeLessThanOrEqual(1024 * 1024); // one chunk
  });
});

describe("checkModelFile", () => {
  it("checks every part of a split model, naming the part that fails", async () => {
    const sound = corpus.find((entry) => entry.name === "sound")!.bytes;
    const first = path.join(directory, "split-00001-of-00002.gguf");
    await writeFile(first, sound);
    await writeFile(path.join(directory, "split-00002-of-00002.gguf"), sound.subarray(0, 20));
    await expect(checkModelFile(first)).rejects.toThrow(/^part split-00002-of-00002\.gguf: the file ends at byte 20, .* \[truncated\]$/);
    await writeFile(path.join(directory, "split-00002-of-00002.gguf"), sound);
    expect((await checkModelFile(first)).metadata.get("general.architecture")).toBe("llama");
  });
});

describe("the GGUF reader on sound models", () => {
  it("reads the tiny test model as node-llama-cpp does", async () => {
    const file = await testModelPath("tiny");
    const header = await readGgufHeader(file);
    const theirs = await readGgufFileInfo(file, { logWarnings: false });
    expect(header.version).toBe(theirs.version);
    expect(header.tensors.map((tensor) => [tensor.name, tensor.dims.map(Number), tensor.offset])).toEqual(
      (theirs.fullTensorInfo ?? []).map((tensor) => [tensor.name, tensor.dimensions.map(Number), BigInt(tensor.offset)]),
    );
    expect(header.metadata.get("general.architecture")).toBe("llama");
    expect(header.metadata.get("llama.context_length")).toBe(4096);
    expect(header.arrayLengths.get("tokenizer.ggml.tokens")).toBe((theirs.metadata.tokenizer?.ggml?.tokens as unknown[]).length);
    expect(header.metadata.get("tokenizer.chat_template")).toBe(theirs.metadata.tokenizer?.chat_template);
  });

  it("reads a header of a 200,000-token vocabulary and 250,000 merges (like Llama 3's or Qwen's) in bounded memory", async () => {
    const tokens = Array.from({ length: 200_000 }, (_, index) => `tok${index}`);
    const merges = Array.from({ length: 250_000 }, (_, index) => `m${index} n${index}`);
    const writer = new GgufWriter()
      .set("general.architecture", { type: "string", value: "llama" })
      .set("tokenizer.ggml.tokens", { type: "array", itemType: "string", values: tokens })
      .set("tokenizer.ggml.scores", { type: "array", itemType: "float32", values: tokens.map(() => 0) })
      .set("tokenizer.ggml.merges", { type: "array", itemType: "string", values: merges })
      .addTensor({ name: "token_embd.weight", dims: [1, tokens.length], type: "F16", values: () => new Float32Array(tokens.length) });
    const file = path.join(directory, "big-vocabulary.gguf");
    const size = await writer.write(file);
    const stats = newReadStats();
    const started = performance.now();
    const header = await readGgufHeader(file, stats);
    const ms = performance.now() - started;
    console.log(
      `a ${(size / 1e6).toFixed(1)} MB file with a 200k vocabulary: read in ${ms.toFixed(0)} ms, ${stats.bytesRead} bytes read, largest buffer ${stats.largestBuffer}, ${stats.retainedBytes} bytes kept`,
    );
    expect(header.arrayLengths.get("tokenizer.ggml.merges")).toBe(250_000);
    expect(header.metadata.has("tokenizer.ggml.tokens")).toBe(false); // counted, not kept
    expect(header.parameterCount).toBe(200_000);
    expect(stats.largestBuffer).toBeLessThanOrEqual(1024 * 1024);
    expect(stats.retainedBytes).toBeLessThan(64 * 1024);
  });

  it("reads chosen keys whole and typed (readGgufValues): written back, they give the same bytes", async () => {
    const tokens = Array.from({ length: 10_000 }, (_, index) => (index % 3 === 0 ? `▁tok${index}` : `Ġ${index}🎉`));
    const vocabulary = (writer: GgufWriter) =>
      writer
        .set("tokenizer.ggml.model", { type: "string", value: "gpt2" })
        .set("tokenizer.ggml.tokens", { type: "array", itemType: "string", values: tokens })
        .set("tokenizer.ggml.token_type", { type: "array", itemType: "int32", values: tokens.map((_, index) => (index < 9_000 ? 1 : 3)) })
        .set("tokenizer.ggml.scores", { type: "array", itemType: "float32", values: tokens.map((_, index) => -index / 4) })
        .set("tokenizer.ggml.bos_token_id", { type: "uint32", value: 9_000 })
        .set("tokenizer.ggml.add_bos_token", { type: "bool", value: true });
    const original = path.join(directory, "vocabulary.gguf");
    await vocabulary(new GgufWriter().set("general.architecture", { type: "string", value: "llama" })).write(original);

    const values = await readGgufValues(original, (key) => key.startsWith("tokenizer."));
    expect([...values.keys()]).toEqual([
      "tokenizer.ggml.model",
      "tokenizer.ggml.tokens",
      "tokenizer.ggml.token_type",
      "tokenizer.ggml.scores",
      "tokenizer.ggml.bos_token_id",
      "tokenizer.ggml.add_bos_token",
    ]);
    const copy = new GgufWriter().set("general.architecture", { type: "string", value: "llama" });
    for (const [key, value] of values) copy.set(key, value);
    const copied = path.join(directory, "vocabulary-copy.gguf");
    await copy.write(copied);
    expect((await readFile(copied)).equals(await readFile(original))).toBe(true);
  });
});

/** One random change to a file: a byte flip, a cut, an insertion, or a random u64 written over a field. */
const mutation = fc.oneof(
  fc.record({ kind: fc.constant("flip" as const), at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant("cut" as const), at: fc.nat() }),
  fc.record({ kind: fc.constant("insert" as const), at: fc.nat(), bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }) }),
  fc.record({ kind: fc.constant("u64" as const), at: fc.nat(), value: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }) }),
);
type Mutation = typeof mutation extends fc.Arbitrary<infer M> ? M : never;

function mutate(bytes: Buffer, mutations: readonly Mutation[]): Buffer {
  let out = Buffer.from(bytes);
  for (const change of mutations) {
    const at = out.length === 0 ? 0 : change.at % out.length;
    switch (change.kind) {
      case "flip":
        if (out.length > 0) out[at] = change.value;
        break;
      case "cut":
        out = out.subarray(0, at);
        break;
      case "insert":
        out = Buffer.concat([out.subarray(0, at), change.bytes, out.subarray(at)]);
        break;
      case "u64":
        if (out.length >= 8) out.writeBigUInt64LE(change.value, Math.min(at, out.length - 8));
        break;
      default:
        return change satisfies never;
    }
  }
  return out;
}

/** A read that takes longer than this is a hang: the largest mutated file here is 330 KB. */
const HANG_MS = 5_000;

describe("the GGUF reader on random mutations of a sound model", () => {
  const property = (name: string, sound: () => Promise<Buffer>, runs: number) =>
    it(name, async () => {
      const bytes = await sound();
      const file = path.join(directory, `mutated-${name.length}.gguf`);
      const heapBefore = process.memoryUsage().heapUsed;
      let accepted = 0;
      let largestBuffer = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(mutation, { minLength: 1, maxLength: 4 }), async (mutations) => {
          const mutated = mutate(bytes, mutations);
          await writeFile(file, mutated);
          const stats = newReadStats();
          let timer: NodeJS.Timeout | undefined;
          const hang = new Promise<never>(
            (_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${HANG_MS} ms`)), HANG_MS)),
          );
          try {
            // A crash (anything thrown but a GgufRefusal) or a hang fails the property.
            if ((await Promise.race([outcome(file, stats), hang])) === "accepted") accepted++;
          } finally {
            clearTimeout(timer);
          }
          // The reader's own accounting: no buffer larger than the file, kept values within budget.
          expect(stats.largestBuffer).toBeLessThanOrEqual(mutated.length);
          expect(stats.retainedBytes).toBeLessThanOrEqual(MAX_RETAINED_BYTES);
          largestBuffer = Math.max(largestBuffer, stats.largestBuffer);
        }),
        { numRuns: runs },
      );
      const heapGrowth = process.memoryUsage().heapUsed - heapBefore;
      console.log(
        `${name}: ${runs} mutations, ${accepted} accepted, largest buffer ${largestBuffer} bytes, heap growth ${(heapGrowth / 1e6).toFixed(1)} MB`,
      );
      // Garbage not yet collected included: far below what one unbounded allocation would take.
      expect(heapGrowth).toBeLessThan(256 * 1024 * 1024);
    });

  property("the corpus's sound model", async () => corpus.find((entry) => entry.name === "sound")!.bytes, 2000);
  property("the tiny test model", async () => readFile(await testModelPath("tiny")), 300);
});
