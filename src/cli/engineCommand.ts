import type { Config } from "../config/settings.js";
import { loadLlama } from "../engine/loadLlama.js";
import { nativeMultimodal, nativeSteps } from "../engine/llamaInternals.js";
import { buildNativeEngine } from "../engine/nativeEngine.js";
import { UsageError } from "./UsageError.js";

const engineUsage = "modelhost engine <build|status> [options]";

/**
 * `engine build` compiles llama.cpp for this CPU from the source bundled with node-llama-cpp;
 * `engine status` says which binary the server would load, with how many threads.
 */
export async function engineCommand(action: string | undefined, config: Config): Promise<string> {
  switch (action) {
    case "build": {
      const { seconds, systemInfo, nativeSteps: withSteps } = await buildNativeEngine();
      return [
        `Built llama.cpp for this machine in ${seconds.toFixed(0)} s${withSteps ? ", with modelhost's native decode steps" : ""}.`,
        systemInfo.trim(),
        "The server uses it from now on (--engine auto).",
      ].join("\n");
    }
    case "status": {
      const { llama, backend, threads } = await loadLlama({
        engine: config.engine,
        gpu: config.gpu,
        threads: config.threads === "auto" ? undefined : config.threads,
      });
      try {
        return [
          `backend: ${backend}`,
          `gpu: ${llama.gpu || "none"}`,
          `threads: ${threads}`,
          // One native task per decode step (decode and samples) when built by `engine build`.
          `decode step: ${nativeSteps(llama) ? "native loop (decode and sample in one task, steps without the event loop)" : "decode, then sample (node-llama-cpp)"}`,
          // llama.cpp's tools/mtmd, which vision models read images with, is in the native build only.
          `images: ${nativeMultimodal(llama) ? "yes (llama.cpp's mtmd: vision models with their projector)" : "no (this binary lacks llama.cpp's mtmd: run `modelhost engine build`)"}`,
          `llama.cpp: ${llama.llamaCppRelease.release}`,
          llama.systemInfo.trim(),
        ].join("\n");
      } finally {
        await llama.dispose();
      }
    }
    default:
      throw new UsageError(`Usage: ${engineUsage}`);
  }
}
