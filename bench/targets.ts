// The servers a workload measures, started alike (same file, threads, context and slots), and the
// alternation that has them take turns.
import type { KvCacheType } from "../src/core/KvCacheType.js";
import { kvCacheScale } from "./kvCache.js";
import { names, type ModelFigures, type TargetKey } from "./metrics.js";
import { startLlamaServer, startModelhost, type RunningProcess, type ServerOptions } from "./servers.js";

export interface Target {
  key: TargetKey;
  /** How the tables call it: "modelhost", "llama-server", "modelhost@<commit>". */
  label: string;
  url: string;
  process: RunningProcess;
}

export interface TargetSetup {
  engine: string;
  /** llama-server's binary, when there is one to compare with. */
  llamaServer: string | undefined;
  /** Another built checkout of modelhost (`--baseline`). */
  baseline: { dir: string; name: string } | undefined;
}

/** modelhost, llama-server and the baseline, each in its own process with `options`. */
export async function startTargets(setup: TargetSetup, options: ServerOptions, llamaServerArgs: readonly string[] = []): Promise<Target[]> {
  const targets: Target[] = [];
  try {
    const modelhost = await startModelhost({ ...options, engine: setup.engine });
    targets.push({ key: "modelhost", label: "modelhost", url: modelhost.url, process: modelhost });
    if (setup.llamaServer) {
      const server = await startLlamaServer(setup.llamaServer, options, llamaServerArgs);
      targets.push({ key: "llama_server", label: "llama-server", url: server.url, process: server });
    }
    if (setup.baseline) {
      const old = await startModelhost({ ...options, engine: setup.engine, checkout: setup.baseline.dir });
      targets.push({ key: "baseline", label: setup.baseline.name, url: old.url, process: old });
    }
    return targets;
  } catch (error) {
    await stopTargets(targets);
    throw error;
  }
}

export async function stopTargets(targets: readonly Target[]): Promise<void> {
  for (const target of targets) await target.process.stop();
}

/** Long enough for the previous phase's spinning OpenMP threads to go to sleep. */
export function quiet(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 200));
}

/**
 * Runs `measure` on each target in turn, one at a time, after a pause, starting with another
 * target each round: the machine's speed drifts by 10–15% within an hour, and the OpenMP threads of
 * the phase before spin for a while after their last decode (libgomp's spin-wait), which slowed
 * whichever target came next. This way every target sees the same drift and the same neighbours.
 */
export async function inTurn<T>(
  targets: readonly Target[],
  round: number,
  measure: (target: Target) => Promise<T>,
): Promise<Map<TargetKey, T>> {
  const results = new Map<TargetKey, T>();
  for (let i = 0; i < targets.length; i++) {
    const target = targets[(i + round) % targets.length]!;
    await quiet();
    results.set(target.key, await measure(target));
  }
  return results;
}

/** What every workload gets: the model, the servers' settings, and where its figures go. */
export interface ModelRun {
  preset: string;
  modelPath: string;
  /** A folder holding only the model, as `<preset>.gguf`, for modelhost's --models-dir. */
  modelsDir: string;
  threads: number;
  setup: TargetSetup;
  /** llama-bench, when built next to llama-server. */
  llamaBench: string | undefined;
  /** An f16 KV cache's bytes per token of context (bench/kvCache.ts), for the KV cache's share of memory. */
  kvBytesPerToken: number | undefined;
  figures: ModelFigures;
}

/**
 * Each server's peak RSS (VmHWM) since it started, and modelhost's lead over llama-server, under
 * `workload`: every workload starts its servers afresh, so the peak is that workload's own. With
 * the KV cache both allocate for the whole context (slots × context × bytes a token).
 */
async function recordMemory(run: ModelRun, workload: string, targets: readonly Target[], kvCacheMiB: number | undefined): Promise<void> {
  for (const target of targets) run.figures.set(names.memory(workload, target.key), await target.process.peakRssMiB());
  const ours = run.figures.get(names.memory(workload, "modelhost"));
  const theirs = run.figures.get(names.memory(workload, "llama_server"));
  if (ours !== undefined && theirs !== undefined) run.figures.set(names.memoryDelta(workload), ours - theirs);
  const shown = targets.map((t) => `${t.label} ${run.figures.get(names.memory(workload, t.key))?.toFixed(0)} MiB`).join(", ");
  if (kvCacheMiB !== undefined) run.figures.set(names.memoryKvCache(workload), kvCacheMiB);
  const kv = kvCacheMiB === undefined ? "" : `; KV cache of the context, ${kvCacheMiB.toFixed(0)} MiB in each`;
  console.log(`peak RSS (VmHWM), ${workload}: ${shown}${kv}`);
}

/** Starts the targets, runs `body`, records their memory under `workload` (unless `memory` is false), and stops them. */
export async function withTargets(
  run: ModelRun,
  workload: string,
  options: {
    parallel: number;
    contextSize: number;
    cacheType?: KvCacheType;
    llamaServerArgs?: readonly string[];
    kvCache?: boolean;
    memory?: boolean;
  },
  body: (targets: Target[]) => Promise<void>,
): Promise<void> {
  const targets = await startTargets(
    run.setup,
    { modelPath: run.modelPath, modelsDir: run.modelsDir, threads: run.threads, ...options },
    options.llamaServerArgs,
  );
  try {
    await body(targets);
    if (options.memory === false) return;
    const kvCacheMiB =
      options.kvCache === false || run.kvBytesPerToken === undefined
        ? undefined
        : (run.kvBytesPerToken * kvCacheScale(options.cacheType ?? "f16") * options.contextSize * options.parallel) / 2 ** 20;
    await recordMemory(run, workload, targets, kvCacheMiB);
  } finally {
    await stopTargets(targets);
  }
}
