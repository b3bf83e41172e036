import { parseArgs } from "node:util";
import { DEFAULT_SEED, makeTestModel } from "../testmodels/makeTestModel.js";
import { presets, type TestModelPresetName } from "../testmodels/presets.js";
import { UsageError } from "./UsageError.js";

// The real-shape presets (qwen2.5-0.5b-q4_k_m, ...) take their vocabularies from llama.cpp's source
// tree and llama-quantize; the bench makes them (test/support/testModels.ts), this command does not.
const names = Object.keys(presets).filter((name) => presets[name as TestModelPresetName].realShape === undefined);

const makeTestModelHelp = `Write a GGUF model with deterministic random weights and the project's own vocabulary: a chat
model (llama architecture, byte-level BPE, ChatML chat template) that produces gibberish, a
sentence-embedding model or a reranker (bert architecture, WordPiece). They exist for tests and benchmarks.

Usage: modelhost make-test-model --preset <${names.join("|")}> --out <file.gguf> [--seed <n>]

Options:
  --preset <name>   ${names.join(", ")}
                      tiny: chat model under 2 MB, for tests
                      bench: chat model, ~100M parameters in Q8_0, for benchmarks
                      embed-tiny: BERT-style embedding model (64 dimensions, mean pooling) under 2 MB
                      think-tiny: tiny with a Qwen3-style <think> section that every reply opens
                      rerank-tiny: BERT-style reranker (cross-encoder, rank pooling) under 2 MB
                      fim-tiny: tiny with fill-in-the-middle tokens (<|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>)
                      long-tiny: tiny with a 32,768-token context, for streams long enough to stop by hand
                      script-tiny: tiny with a hidden size of 128, the shape for scripted replies (makeTestModel's
                        script option, from code); from here, random weights like tiny's
                      script-1b: Llama-3.2-1B's blocks in Q8_0 (about 1 GB), the target the speculative
                        decoding bench scripts (bench/speculation.ts); from here, random weights
                      qwen2-tiny: tiny in the qwen2 architecture (query, key and value biases, tied embeddings)
                      qwen2vl-tiny: tiny in the qwen2vl architecture (M-RoPE positions), for the vision tests
                      nomic-tiny: embed-tiny in the nomic-bert architecture (rotary, SwiGLU, no block biases)
  --out <file>      Where to write the model (written to a temporary file, then renamed).
  --seed <n>        Seed of the weights (default ${DEFAULT_SEED}); the same seed gives the same bytes.`;

export async function makeTestModelCommand(args: string[]): Promise<string> {
  const { values } = parseArgs({
    args,
    options: { preset: { type: "string" }, out: { type: "string" }, seed: { type: "string" }, help: { type: "boolean" } },
    strict: true,
  });
  if (values.help) return makeTestModelHelp;
  if (!values.preset || !names.includes(values.preset)) {
    throw new UsageError(`--preset must be one of: ${names.join(", ")}.`);
  }
  if (!values.out) throw new UsageError("--out <file.gguf> is required.");
  const seed = values.seed === undefined ? DEFAULT_SEED : Number(values.seed);
  if (!Number.isSafeInteger(seed) || seed < 0) throw new UsageError("--seed must be a non-negative integer.");
  const started = performance.now();
  const made = await makeTestModel({ preset: values.preset as TestModelPresetName, out: values.out, seed });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  return `Wrote ${made.path}: ${made.parameters.toLocaleString("en")} parameters, ${made.bytes.toLocaleString("en")} bytes, in ${seconds} s.`;
}
