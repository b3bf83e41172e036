import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { access } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { llamaCppSource } from "../test/support/llamaCppSource.js";

/**
 * llama.cpp's own tools for the comparison: llama-server (the HTTP anchor) and llama-bench (the raw
 * engine figure), built from the very source node-llama-cpp ships
 * (node_modules/node-llama-cpp/llama/gitRelease.bundle), so both sides run the same llama.cpp commit.
 */
export interface LlamaCppTools {
  server: string;
  /** llama-bench next to llama-server, when there is one. */
  bench: string | undefined;
}

// The same engine options as `modelhost engine build` (src/engine/nativeEngine.ts): this CPU's
// instruction set, OpenMP. Static, so the binaries need no library path; no tests or examples, no
// HTTPS: only the two targets are compiled (about 10 minutes on 2 cores).
const cmakeOptions = [
  "-DCMAKE_BUILD_TYPE=Release",
  "-DBUILD_SHARED_LIBS=OFF",
  "-DLLAMA_BUILD_TESTS=OFF",
  "-DLLAMA_BUILD_EXAMPLES=OFF",
  "-DLLAMA_OPENSSL=OFF",
  "-DGGML_NATIVE=ON",
  "-DGGML_OPENMP=ON",
];

async function exists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}

async function run(command: string, args: string[], cwd?: string): Promise<void> {
  console.error(`$ ${command} ${args.join(" ")}`);
  const child = spawn(command, args, { cwd, stdio: ["ignore", "inherit", "inherit"] });
  const [code] = (await once(child, "exit")) as [number | null];
  if (code !== 0) throw new Error(`${command} exited with code ${code}`);
}

/** Clones the bundled source into the cache once (test/support/llamaCppSource.ts), then configures and builds (incrementally). */
async function build(): Promise<LlamaCppTools> {
  const sourceDir = await llamaCppSource();
  const buildDir = path.join(sourceDir, "build");
  await run("cmake", ["-S", sourceDir, "-B", buildDir, ...cmakeOptions]);
  await run("cmake", ["--build", buildDir, "--config", "Release", "-j", "2", "--target", "llama-server", "llama-bench"]);
  return { server: path.join(buildDir, "bin/llama-server"), bench: path.join(buildDir, "bin/llama-bench") };
}

/** `--llama-server build` builds (or reuses) the cached build; anything else is a llama-server binary. */
export async function llamaCppTools(option: string): Promise<LlamaCppTools> {
  if (option === "build") return build();
  const server = path.resolve(option);
  if (!(await exists(server))) throw new Error(`no llama-server at ${server}`);
  const bench = path.join(path.dirname(server), "llama-bench");
  return { server, bench: (await exists(bench)) ? bench : undefined };
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
  const args = [
    "-m",
    modelPath,
    "-t",
    String(options.threads),
    "-p",
    "0",
    "-n",
    String(options.tokens),
    "-d",
    options.depths.join(","),
    "-r",
    String(options.repetitions),
    "-o",
    "json",
  ];
  const { stdout } = await promisify(execFile)(binary, args, { maxBuffer: 1 << 20 });
  const results = JSON.parse(stdout) as Array<{ n_gen: number; n_depth?: number; avg_ts: number }>;
  return options.depths.map((depth) => {
    const tg = results.find((result) => result.n_gen === options.tokens && (result.n_depth ?? 0) === depth);
    if (!tg) throw new Error(`llama-bench reported no tg${options.tokens} at depth ${depth}: ${stdout}`);
    return tg.avg_ts;
  });
}
