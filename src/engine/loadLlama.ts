import { getLlama, LlamaLogLevel, type Llama } from "node-llama-cpp";
import { ServerError } from "../core/ServerError.js";
import { NATIVE_CMAKE_OPTIONS } from "./nativeEngine.js";

export type EngineChoice = "auto" | "native" | "prebuilt";
export type GpuChoice = "off" | "auto" | "cuda" | "vulkan" | "metal";

export interface LoadLlamaOptions {
  engine: EngineChoice;
  gpu: GpuChoice;
  /** CPU threads; undefined = the cores useful for math on this machine. */
  threads?: number;
  onLog?: (level: "error" | "warn", message: string) => void;
}

export interface LoadedLlama {
  llama: Llama;
  /** "native" for a local build made by `modelhost engine build`, else "prebuilt". */
  backend: "native" | "prebuilt";
  threads: number;
}

/**
 * Loads a llama.cpp binary without ever compiling or downloading: the native build when one was
 * made (and `engine` allows it), else the prebuilt binary shipped with node-llama-cpp.
 */
export async function loadLlama(options: LoadLlamaOptions): Promise<LoadedLlama> {
  let llama: Llama;
  try {
    llama = await getLlama({
      gpu: options.gpu === "off" ? false : options.gpu,
      build: "never",
      skipDownload: true,
      progressLogs: false,
      // The native build is found by its CMake options; without them node-llama-cpp loads the prebuilt binary.
      ...(options.engine === "prebuilt" ? {} : { cmakeOptions: { ...NATIVE_CMAKE_OPTIONS } }),
      usePrebuiltBinaries: options.engine !== "native",
      // node-llama-cpp's default is max(4, cores), which oversubscribes small machines badly.
      maxThreads: options.threads ?? 0,
      logLevel: LlamaLogLevel.warn,
      logger: (level, message) => {
        // One line: llama.cpp follows some errors with a dump of their input (a refused grammar
        // prints all of it, thousands of lines, on every such request).
        const text = message.trim().split("\n", 1)[0]?.slice(0, 300) ?? "";
        if (!text || routineMessages.some((routine) => text.includes(routine))) return;
        if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) options.onLog?.("error", text);
        else if (level === LlamaLogLevel.warn) options.onLog?.("warn", text);
      },
    });
  } catch (error) {
    throw new ServerError("engine_unavailable", {
      cause: error,
      message:
        options.engine === "native"
          ? "No native llama.cpp build was found. Run `modelhost engine build` (or `npm run build:engine`) first, or start with --engine auto."
          : "No llama.cpp binary could be loaded for this machine. Run `modelhost engine build` to compile one from the bundled source.",
    });
  }
  const backend = llama.buildType === "localBuild" ? "native" : "prebuilt";
  return { llama, backend, threads: options.threads ?? defaultThreads(backend, llama.cpuMathCores) };
}

/**
 * llama.cpp warnings that describe normal operation through node-llama-cpp and would otherwise be
 * logged once per request or per input.
 */
const routineMessages = [
  // node-llama-cpp marks only the last token as an output; llama.cpp then outputs all of them for
  // pooling, as it should. Logged for every embedded input.
  "embeddings required but some input tokens were not marked as outputs",
];

/**
 * Threads when the user sets none. The native (OpenMP) build uses every core. The prebuilt binary
 * starts its worker threads afresh for each decode and spin-waits on them; when they take every core,
 * Node's own thread preempts one mid-decode and the others spin until the scheduler's next tick
 * (tokens 10–40 ms apart instead of under 1 ms on 2 cores). Leaving Node a core avoids that.
 */
function defaultThreads(backend: "native" | "prebuilt", cores: number): number {
  return backend === "native" ? cores : Math.max(1, cores - 1);
}
