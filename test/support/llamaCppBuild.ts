import { spawn } from "node:child_process";
import { once } from "node:events";
import path from "node:path";
import { llamaCppSource } from "./llamaCppSource.js";

/**
 * llama.cpp's own tools built from the very source node-llama-cpp ships (llamaCppSource.ts), so they
 * run the same llama.cpp commit as the server: llama-server and llama-bench for the bench
 * (bench/llamaCpp.ts), llama-quantize for the real-shape bench models (test/support/testModels.ts),
 * llama-tokenize for the token cross-check (test/engine/tokenCrossCheck.test.ts).
 * One build folder in the cache, next to the source: each caller builds the targets it needs, and a
 * target already built is only checked (seconds); the first build of a target takes minutes on 2 cores
 * (llama-tokenize with the libraries it links: about 6.5 minutes; llama-server about 10).
 *
 * Two processes building into the folder at once would clash: the bench and the one test file
 * that builds are not run together.
 */

// The same engine options as `modelhost engine build` (src/engine/nativeEngine.ts): this CPU's
// instruction set, OpenMP. Static, so the binaries need no library path; no tests or examples, no
// HTTPS: only the targets asked for are compiled.
const cmakeOptions = [
  "-DCMAKE_BUILD_TYPE=Release",
  "-DBUILD_SHARED_LIBS=OFF",
  "-DLLAMA_BUILD_TESTS=OFF",
  "-DLLAMA_BUILD_EXAMPLES=OFF",
  "-DLLAMA_OPENSSL=OFF",
  "-DGGML_NATIVE=ON",
  "-DGGML_OPENMP=ON",
];

/** Runs a command with its output on this process's, failing on a non-zero exit. */
export async function run(command: string, args: string[]): Promise<void> {
  console.error(`$ ${command} ${args.join(" ")}`);
  const child = spawn(command, args, { stdio: ["ignore", "inherit", "inherit"] });
  const [code] = (await once(child, "exit")) as [number | null];
  if (code !== 0) throw new Error(`${command} exited with code ${code}`);
}

/**
 * Clones the bundled source into the cache once, then configures and builds `targets`
 * (incrementally); returns the folder of the binaries (`<build>/bin/<target>`).
 */
export async function buildLlamaCpp(targets: readonly string[]): Promise<string> {
  const sourceDir = await llamaCppSource();
  const buildDir = path.join(sourceDir, "build");
  await run("cmake", ["-S", sourceDir, "-B", buildDir, ...cmakeOptions]);
  await run("cmake", ["--build", buildDir, "--config", "Release", "-j", "2", "--target", ...targets]);
  return path.join(buildDir, "bin");
}
