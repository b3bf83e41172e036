import { execFile } from "node:child_process";
import { access } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { buildLlamaCpp } from "../test/support/llamaCppBuild.js";

/**
 * llama.cpp's own tools for the comparison: llama-server (the HTTP anchor) and llama-bench (the raw
 * engine figure), built from the very source node-llama-cpp ships
 * (node_modules/node-llama-cpp/llama/gitRelease.bundle), so both sides run the same llama.cpp commit.
 * llama-quantize is built with them: the real-shape models (qwen2.5-0.5b-q4_k_m, ...) are quantized
 * with it when first asked for (test/support/testModels.ts).
 */
export interface LlamaCppTools {
  server: string;
  /** llama-bench next to llama-server, when there is one. */
  bench: string | undefined;
}

async function exists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}

/** Builds (or reuses) the three in the cache (test/support/llamaCppBuild.ts; about 10 minutes on 2 cores the first time). */
async function build(): Promise<LlamaCppTools> {
  const bin = await buildLlamaCpp(["llama-server", "llama-bench", "llama-quantize"]);
  return { server: path.join(bin, "llama-server"), bench: path.join(bin, "llama-bench") };
}

/** `--llama-server build` builds (or reuses) the cached build; anything else is a llama-server binary. */
export async function llamaCppTools(option: string): Promise<LlamaCppTools> {
  if (option === "build") return build();
  const server = path.resolve(option);
  if (!(await exists(server))) throw new Error(`no llama-server at ${server}`);
  const bench = path.join(path.dirname(server), "llama-bench");
  return { server, bench: (await exists(bench)) ? bench : undefined };
}

interface LlamaBenchResult {
  n_prompt: number;
  n_gen: number;
  n_depth?: number;
  avg_ts: number;
}

/** Runs llama-bench on `modelPath` with `threads` and `args`, and parses its JSON report. */
async function llamaBench(binary: string, modelPath: string, threads: number, args: readonly string[]): Promise<LlamaBenchResult[]> {
  const { stdout } = await promisify(execFile)(binary, ["-m", modelPath, "-t", String(threads), ...args, "-o", "json"], {
    maxBuffer: 1 << 20,
  });
  return JSON.parse(stdout) as LlamaBenchResult[];
}

/**
 * llama-bench's text-generation speed (`-p 0 -n <tokens> -r <repetitions>`), tokens/s averaged over
 * its repetitions, once for each depth (`-d`: tokens already in the cache when generation starts),
 * in the order given. Depth 0 is the raw figure; a server's stream also attends to its chat
 * prompt, which depth `prompt tokens` adds.
 */
export async function llamaBenchTg(
  binary: string,
  modelPath: string,
  options: { threads: number; tokens: number; repetitions: number; depths: readonly number[] },
): Promise<number[]> {
  const args = ["-p", "0", "-n", String(options.tokens), "-d", options.depths.join(","), "-r", String(options.repetitions)];
  const results = await llamaBench(binary, modelPath, options.threads, args);
  return options.depths.map((depth) => {
    const tg = results.find((result) => result.n_gen === options.tokens && (result.n_depth ?? 0) === depth);
    if (!tg) throw new Error(`llama-bench reported no tg${options.tokens} at depth ${depth}: ${JSON.stringify(results)}`);
    return tg.avg_ts;
  });
}

/** llama-bench's prompt-processing speed (`-p <lengths> -n 0`), tokens/s for each length in the order given. */
export async function llamaBenchPp(
  binary: string,
  modelPath: string,
  options: { threads: number; lengths: readonly number[]; repetitions: number },
): Promise<number[]> {
  const args = ["-p", options.lengths.join(","), "-n", "0", "-r", String(options.repetitions)];
  const results = await llamaBench(binary, modelPath, options.threads, args);
  return options.lengths.map((length) => {
    const pp = results.find((result) => result.n_prompt === length && result.n_gen === 0);
    if (!pp) throw new Error(`llama-bench reported no pp${length}: ${JSON.stringify(results)}`);
    return pp.avg_ts;
  });
}
