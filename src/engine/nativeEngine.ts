import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { nativeSteps } from "./llamaInternals.js";
import { withAddonPatch } from "./native/addonPatch.js";

/**
 * The CMake options of our native build. node-llama-cpp files a local build under a folder named
 * after its options, so these also select it when loading: a build made without options would be
 * picked up by every getLlama() call, leaving no way back to the prebuilt binary.
 * OpenMP keeps one team of worker threads that sleep when idle; the prebuilt binary (no OpenMP)
 * creates its workers anew for every decode and spins them, which stalls on small machines.
 */
export const NATIVE_CMAKE_OPTIONS: Readonly<Record<string, string>> = { GGML_NATIVE: "ON", GGML_OPENMP: "ON" };

/**
 * Compiles llama.cpp for this CPU from the source bundle node-llama-cpp ships
 * (llama/gitRelease.bundle): offline, with the system's cmake and C++ compiler. Takes minutes.
 * The result lives in node_modules/node-llama-cpp/llama/localBuilds, so a fresh `npm ci` drops it.
 */
export async function buildNativeEngine(
  log: (line: string) => void = console.error,
): Promise<{ seconds: number; systemInfo: string; nativeSteps: boolean }> {
  const started = performance.now();
  // With modelhost's native steps (decode and sample in one task, the generation loop: see native/addonPatch.ts).
  const llama = await withAddonPatch(
    () =>
      getLlama({
        gpu: false,
        build: "forceRebuild",
        cmakeOptions: { ...NATIVE_CMAKE_OPTIONS },
        progressLogs: true,
        logLevel: LlamaLogLevel.warn,
      }),
    log,
  );
  try {
    if (llama.buildType !== "localBuild") throw new Error(`the build finished, but node-llama-cpp loaded a ${llama.buildType} binary`);
    return { seconds: (performance.now() - started) / 1000, systemInfo: llama.systemInfo, nativeSteps: nativeSteps(llama) !== undefined };
  } finally {
    await llama.dispose();
  }
}
